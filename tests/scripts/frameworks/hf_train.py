"""A tiny GPT-2 trained by Hugging Face's ``Trainer.train``, unmodified: gradients accumulated
over 2 batches, ``max_steps`` ending training inside the third epoch, logging every 4 steps,
an evaluation at each epoch's end, a linear learning-rate schedule, and a user callback with
its own counters. Hindsight goes in the callback's ``on_evaluate`` (after the training) or
its ``on_log`` (inside: logging happens every few steps). The timing lines Hugging Face's
own printer adds differ from run to run, so the script drops that printer."""

import torch
from transformers import (
    GPT2Config,
    GPT2LMHeadModel,
    PrinterCallback,
    Trainer,
    TrainerCallback,
    TrainingArguments,
)


class Tokens(torch.utils.data.Dataset):
    def __init__(self, n, seed):
        self.ids = torch.randint(0, 64, (n, 16), generator=torch.Generator().manual_seed(seed))

    def __len__(self):
        return len(self.ids)

    def __getitem__(self, i):
        return {"input_ids": self.ids[i], "labels": self.ids[i]}


class Watcher(TrainerCallback):
    def __init__(self):
        self.steps = 0

    def on_step_end(self, args, state, control, **kwargs):
        self.steps += 1

    def on_log(self, args, state, control, logs=None, **kwargs):
        if "loss" in logs:
            print(f"  step {state.global_step} loss {logs['loss']:.6f}")  # @inside: print(f"  grad norm {logs['grad_norm']:.6f} lr {logs['learning_rate']:.6g}")

    def on_evaluate(self, args, state, control, metrics=None, **kwargs):
        print(f"epoch {state.epoch:.2f} eval_loss {metrics['eval_loss']:.6f} after {self.steps} steps")  # @outside: print(f"  weights {kwargs['model'].transformer.wte.weight.norm():.6f} lr {kwargs['lr_scheduler'].get_last_lr()[0]:.6g} logs {len(state.log_history)}")


torch.manual_seed(0)
model = GPT2LMHeadModel(GPT2Config(vocab_size=64, n_positions=16, n_embd=32, n_layer=1, n_head=2))
args = TrainingArguments(
    output_dir="out",
    max_steps=15,  # 6 optimizer steps an epoch: training stops inside the third
    per_device_train_batch_size=8,
    gradient_accumulation_steps=2,
    learning_rate=1e-3,
    logging_steps=4,
    eval_strategy="epoch",
    save_strategy="no",
    report_to=[],
    disable_tqdm=True,
    use_cpu=True,
    seed=0,
)
trainer = Trainer(
    model=model,
    args=args,
    train_dataset=Tokens(96, 1),
    eval_dataset=Tokens(32, 2),
    callbacks=[Watcher()],
)
trainer.remove_callback(PrinterCallback)
result = trainer.train()
print("done at step", result.global_step, "train loss", round(result.training_loss, 6))
