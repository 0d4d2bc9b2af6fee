"""Shared test doubles: one copy of each fake, imported as ``from fakes.<room> import ...``.

``tests/`` is on ``sys.path`` (pytest's rootdir conftest), so every test module can import
these. Fakes implement the same protocols as the adapters they replace, so mypy checks them
against the real contracts.
"""
