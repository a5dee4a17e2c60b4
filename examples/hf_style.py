"""A tiny GPT-2 trained by Hugging Face's ``Trainer.train``, no flor in it (``flor run`` drives
the Trainer's epochs: each an iteration, its training the block). Built from a config, on
synthetic tokens: nothing is downloaded.

    flor run --name gpt examples/hf_style.py
"""

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


class Report(TrainerCallback):
    def on_evaluate(self, args, state, control, metrics=None, **kwargs):
        print(f"epoch {state.epoch:.0f} eval_loss {metrics['eval_loss']:.4f}")


torch.manual_seed(0)
config = GPT2Config(vocab_size=64, n_positions=16, n_embd=32, n_layer=1, n_head=2)
args = TrainingArguments(
    output_dir="/tmp/hf_style",
    num_train_epochs=3,
    per_device_train_batch_size=8,
    learning_rate=1e-3,
    eval_strategy="epoch",
    save_strategy="no",
    logging_strategy="no",
    report_to=[],
    disable_tqdm=True,
    use_cpu=True,
)
trainer = Trainer(
    model=GPT2LMHeadModel(config),
    args=args,
    train_dataset=Tokens(96, 1),
    eval_dataset=Tokens(32, 2),
    callbacks=[Report()],
)
trainer.remove_callback(PrinterCallback)  # its lines carry timings, which differ run to run
trainer.train()
