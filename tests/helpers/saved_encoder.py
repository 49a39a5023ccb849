"""A random encoder saved as a checkpoint folder: the `--init_checkpoint` of experiment
tests whose runs must all start from one encoder (seeds then vary the head and the order)."""


def saved_random_encoder(folder, size="2/32/2", seed=0):
    """A random `size` encoder (positions 64, the sample vocabulary) saved in `folder`;
    returns the folder as a string."""
    from kerasbert.model import encoders

    encoder = encoders.random_encoder(size, max_position=64, seed=seed)
    encoders.save_encoder(encoder.backbone, encoder.vocab_file, True, str(folder))
    return str(folder)
