"""An epoch-shaped GPT-2 trained by Hugging Face's ``Trainer.train``, unmodified (for `flor
run`): a small model built from a config, synthetic tokens, a linear schedule, an evaluation
at each epoch's end and a callback printing it (where benchmarks/bench_frameworks.py adds its
hindsight line).

    python hf_epochs.py [epochs]
"""

import sys
import time

import torch
from transformers import (
    GPT2Config,
    GPT2LMHeadModel,
    PrinterCallback,
    Trainer,
    TrainerCallback,
    TrainingArguments,
)

epochs = int(sys.argv[1]) if len(sys.argv) > 1 else 6


class Tokens(torch.utils.data.Dataset):
    def __init__(self, n, seed):
        self.ids = torch.randint(0, 256, (n, 64), generator=torch.Generator().manual_seed(seed))

    def __len__(self):
        return len(self.ids)

    def __getitem__(self, i):
        return {"input_ids": self.ids[i], "labels": self.ids[i]}


class Report(TrainerCallback):
    def on_evaluate(self, args, state, control, metrics=None, **kwargs):
        print(f"epoch {state.epoch:.0f} eval_loss {metrics['eval_loss']:.4f}")
        # HINDSIGHT


torch.manual_seed(0)
config = GPT2Config(vocab_size=256, n_positions=64, n_embd=128, n_layer=2, n_head=4)
args = TrainingArguments(
    output_dir="out",
    num_train_epochs=epochs,
    per_device_train_batch_size=16,
    learning_rate=1e-3,
    eval_strategy="epoch",
    save_strategy="no",
    logging_strategy="no",
    report_to=[],
    disable_tqdm=True,
    use_cpu=True,
    seed=0,
)
trainer = Trainer(
    model=GPT2LMHeadModel(config),
    args=args,
    train_dataset=Tokens(768, 1),
    eval_dataset=Tokens(64, 2),
    callbacks=[Report()],
)
trainer.remove_callback(PrinterCallback)
started = time.perf_counter()  # the loop's own time, on stderr: bench_frameworks.py
trainer.train()
print(f"loop {time.perf_counter() - started:.3f} s", file=sys.stderr)
