"""The instrumenter across a project's files (pure: sources from a dict, no I/O)."""

from __future__ import annotations

import textwrap

from flor.sources import SourceFile
from flor.transform import instrument_project
from flor.transform.report import ProjectInstrumented

STEP = """\
    loss = model(x).pow(2).mean()
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
"""


def project(entry: str, files: dict[str, str]) -> ProjectInstrumented:
    """Instrument ``entry`` in a project whose other modules are ``files`` (module -> source;
    a module ending in ``.__init__`` is a package)."""
    found = {}
    for module, source in files.items():
        package = module.endswith(".__init__")
        name = module.removesuffix(".__init__")
        path = module.replace(".", "/") + ".py"
        found[name] = SourceFile(name, path, textwrap.dedent(source), package)
    return instrument_project(SourceFile("__main__", "main.py", textwrap.dedent(entry)), found.get)


def blocks(result: ProjectInstrumented) -> list[tuple[str, str, tuple[str, ...]]]:
    return [(r.filename, b.name, b.state) for r in result.all for lp in r.loops for b in lp.blocks]


def test_a_call_into_a_sibling_module_makes_the_entry_loop_the_main_loop() -> None:
    """The callee's own analysis says what it mutates: not the data it only iterates."""
    result = project(
        """\
        import torch
        import engine as eng
        model = torch.nn.Linear(2, 1)
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        data = [1.0, 2.0]
        for epoch in range(3):
            stats = eng.train_one_epoch(model, optimizer, data, device="cpu")
            print(stats)
        """,
        {
            "engine": "def train_one_epoch(model, optimizer, data, device):\n"
            "  for x in data:\n" + textwrap.indent(STEP, "  ")
        },
    )
    assert blocks(result) == [("main.py", "module.L0", ("model", "optimizer", "stats"))]
    assert [f.path for f in result.files] == ["engine.py"]
    assert "the call to eng.train_one_epoch(), which trains" in result.report()


def test_a_loop_in_a_method_of_a_package_class_is_rewritten_there() -> None:
    """`from pkg import Trainer` re-exported by the package's __init__, a project base class,
    a relative import between the package's modules."""
    result = project(
        """\
        from pkg import Trainer
        trainer = Trainer()
        trainer.fit()
        print(trainer.steps)
        """,
        {
            "pkg.__init__": "from .trainer import Trainer\n",
            "pkg.base": """\
                import torch
                from . import steps
                class Base:
                    def fit(self):
                        while self.steps < 10:
                            steps.one_step(self.model, self.optimizer)
                            self.steps += 1
                """,
            "pkg.steps": "import torch\ndef one_step(model, optimizer):\n"
            + STEP.replace("x", "torch.ones(2)"),
            "pkg.trainer": """\
                import torch
                from .base import Base
                class Trainer(Base):
                    def __init__(self):
                        self.model = torch.nn.Linear(2, 1)
                        self.optimizer = torch.optim.SGD(self.model.parameters(), lr=0.1)
                        self.steps = 0
                """,
        },
    )
    assert blocks(result) == [("pkg/base.py", "pkg.base.Base.fit.L0", ("self",))]
    assert not result.entry.changed
    assert "flor.it(lambda: self.steps < 10)" in result.others[0].source


def test_a_method_of_an_instance_of_an_imported_class() -> None:
    result = project(
        """\
        from algo.ppo import PPO
        agent = PPO()
        rollouts = []
        for update in range(4):
            rollouts.append(update)
            agent.update(rollouts)
        """,
        {
            "algo.__init__": "",
            "algo.ppo": "class PPO:\n    def update(self, rollouts):\n"
            + textwrap.indent(STEP.replace("x", "1.0"), "    "),
        },
    )
    assert blocks(result)[0][:2] == ("main.py", "module.L0")
    assert set(blocks(result)[0][2]) >= {"agent", "rollouts"}


def test_a_method_of_an_instance_held_on_self() -> None:
    """A runner class keeps the algorithm on ``self`` (``self.agent.update()``)."""
    result = project(
        """\
        from algo import PPO
        class Runner:
            def __init__(self):
                self.agent = PPO()
            def run(self):
                for update in range(4):
                    self.agent.update()
        Runner().run()
        """,
        {
            "algo": "class PPO:\n    def update(self):\n"
            + textwrap.indent(STEP.replace("x", "1.0"), "    ")
        },
    )
    assert blocks(result) == [("main.py", "Runner.run.L0", ("self",))]


def test_globals_a_callee_changes_in_its_own_module_are_state() -> None:
    result = project(
        """\
        import torch
        from engine import train
        model = torch.nn.Linear(2, 1)
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        for epoch in range(3):
            train(model, optimizer)
        """,
        {
            "engine": "steps = 0\nhistory = []\ndef train(model, optimizer):\n"
            "    global steps\n    steps += 1\n    history.append(steps)\n"
            + STEP.replace("x", "1.0")
        },
    )
    state = blocks(result)[0][2]
    assert "engine_steps" in state and "engine_history" in state
    assert 'flor.globals_of("engine")["steps"]' in result.entry.source


def test_modules_that_are_not_the_projects_are_not_followed() -> None:
    """A loop that only calls into a library (resolve says None) is no training loop."""
    result = project(
        "import lib\nfor i in range(3):\n    lib.train()\n",
        {},
    )
    assert blocks(result) == [] and result.files == ()
    assert "no training loop found" in result.report()


def test_arguments_a_callee_takes_through_kwargs_count_as_mutated() -> None:
    result = project(
        """\
        import torch
        from engine import train
        model = torch.nn.Linear(2, 1)
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        for epoch in range(3):
            train(model, optimizer=optimizer)
        """,
        {
            "engine": "def train(model, **extra):\n"
            "    model(1.0).sum().backward()\n"
            '    extra["optimizer"].step()\n'
        },
    )
    assert blocks(result)[0][2] == ("model", "optimizer")


def test_a_star_import_binds_what_the_module_exports() -> None:
    """``from engine import *`` takes ``__all__``'s names, or else the public ones, also
    through a package's ``__init__`` that star-imports its module."""
    train = "def fit(model, optimizer):\n" + STEP.replace("x", "1.0")
    loop = """\
        import torch
        from {module} import *
        model = torch.nn.Linear(2, 1)
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        for epoch in range(3):
            {call}(model, optimizer)
        """
    listed = {"engine": '__all__ = ["fit"]\n' + train}
    assert blocks(project(loop.format(module="engine", call="fit"), listed))[0][1] == "module.L0"
    hidden = {"engine": '__all__ = ["other"]\n' + train}
    assert blocks(project(loop.format(module="engine", call="fit"), hidden)) == []
    private = {"engine": train.replace("def fit", "def _fit")}
    assert blocks(project(loop.format(module="engine", call="_fit"), private)) == []
    package = {"pkg.__init__": "from .engine import *\n", "pkg.engine": train}
    assert blocks(project(loop.format(module="pkg", call="fit"), package))[0][1] == "module.L0"


def test_a_method_of_an_object_another_object_holds() -> None:
    """``runner.agent.learn()``: Runner's ``__init__`` binds ``self.agent = Agent()``."""
    result = project(
        """\
        from runner import Runner
        runner = Runner()
        for episode in range(4):
            runner.agent.learn()
        """,
        {
            "runner": "from agents import Agent\nclass Runner:\n"
            "    def __init__(self):\n        self.agent = Agent()\n",
            "agents": "class Agent:\n    def learn(self):\n"
            + textwrap.indent(STEP.replace("x", "1.0"), "    "),
        },
    )
    assert blocks(result) == [("main.py", "module.L0", ("runner",))]


def test_processes_started_in_another_file_are_refused_there() -> None:
    """No loop trains in the entry: the reason is the other file's multiprocessing."""
    result = project(
        "import torch\nfrom workers import launch\nlaunch(torch.nn.Linear(2, 1))\n",
        {
            "workers": "import torch.multiprocessing as mp\ndef train(model):\n"
            + textwrap.indent(STEP, "    ").replace("model(x)", "model(torch.ones(2))")
            + "def launch(model):\n    model.share_memory()\n"
            "    mp.Process(target=train, args=(model,)).start()\n"
        },
    )
    assert not result.entry.changed and blocks(result) == []
    assert result.report().startswith("workers.py:8: warning: `model.share_memory(...)`: ")
    assert "main.py runs without checkpoints" in result.report()


def test_a_method_of_what_a_factory_returns() -> None:
    """``trainer = build_trainer(cfg)`` in another file returns ``Trainer(...)``, or a name
    bound to one; ``trainer.fit()``'s loop is found in the trainer's file."""
    trainer = """\
        import torch
        class Trainer:
            def __init__(self):
                self.model = torch.nn.Linear(2, 1)
                self.optimizer = torch.optim.SGD(self.model.parameters(), lr=0.1)
            def fit(self):
                for step in range(3):
                    loss = self.model(torch.ones(2)).sum()
                    loss.backward()
                    self.optimizer.step()
        """
    for body in ("return Trainer()", "made = Trainer()\n    return made"):
        result = project(
            "from build import build_trainer\ntrainer = build_trainer(1)\ntrainer.fit()\n",
            {
                "build": f"from trainer import Trainer\ndef build_trainer(cfg):\n    {body}\n",
                "trainer": trainer,
            },
        )
        assert blocks(result) == [("trainer.py", "trainer.Trainer.fit.L0", ("self",))], body
