"""signoff: acceptance tests for GPU clusters."""


class InputError(Exception):
    """Bad user input (profile, inventory, option): one clear message naming the file/key/host."""
