"""Helpers the tests share, imported as tests.helpers.<module>."""
