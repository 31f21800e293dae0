"""Clear, specific errors for bad input. The UI shows their message as it is: no stack traces."""


class InferenceInputError(ValueError):
    """Base class: something about the request itself is wrong; the message says what."""


class EmptyPromptError(InferenceInputError):
    pass


class PromptTooLongError(InferenceInputError):
    pass


class SettingOutOfRangeError(InferenceInputError):
    pass


def check_range(name: str, value: float, low: float, high: float) -> None:
    """Raise SettingOutOfRangeError unless low <= value <= high (and value is a real number)."""
    if value is None or value != value or not (low <= value <= high):
        raise SettingOutOfRangeError(f"{name} must be between {low:g} and {high:g} (got {value!r}).")
