# flor: skip-file
"""The training loop lives here, in the project's other file (PATTERNS 33), which the user
opted out of instrumentation: the run has no checkpoints."""



def fit(model, optimizer, data, epochs):
    for epoch in range(epochs):
        for i in range(0, len(data), 16):
            xb = data[i : i + 16]
            loss = ((model(xb) - xb.sum(1, keepdim=True)) ** 2).mean()
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        print(f"epoch {epoch} loss {loss.item():.6f}")
