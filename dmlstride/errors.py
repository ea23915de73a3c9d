"""Exceptions raised by dmlstride."""

__all__ = ["DescriptorError"]


class DescriptorError(ValueError):
    """A tensor descriptor (or one of its fields) breaks a DirectML rule.

    Subclasses :class:`ValueError`, so callers may catch either.  The message
    names the field, the value given and what was expected, for example
    ``sizes[2] is 0; every size must be at least 1``.
    """
