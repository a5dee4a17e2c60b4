"""The fit loop: epochs of batches, the loss from the model's own training_step."""


class Fitter:
    def __init__(self, max_epochs):
        self.max_epochs = max_epochs
        self.global_step = 0

    def fit(self, model, batches):
        optimizer, scheduler = model.configure_optimizers()
        for epoch in range(self.max_epochs):  # @main-loop
            model.train()
            total = 0.0
            for batch in batches:
                loss = model.training_step(batch)
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()  # @inside: print(f"  grad {sum(p.grad.norm().item() for p in model.parameters()):.6f}")
                total += loss.item()
                self.global_step += 1
            scheduler.step()
            print(f"epoch {epoch} loss {total / len(batches):.6f}")  # @outside: print(f"  lr {scheduler.get_last_lr()[0]:.6f} step {self.global_step}")
