"""The project's typed errors. Each carries a message written for the learner, which the UI
shows as it is (one wrapper in `lessons/common/feedback.py`), never a trace or a class name."""


class InferenceInputError(ValueError):
    """Base class: something about the request itself is wrong; the message says what."""


class EmptyPromptError(InferenceInputError):
    """No text (or nothing left after cleaning)."""


class PromptTooLongError(InferenceInputError):
    """Over a character or token limit, or beyond the model's context window."""


class SettingOutOfRangeError(InferenceInputError):
    """A number outside its `Range`, not a number at all, or a choice not offered."""


class NotReadyError(InferenceInputError):
    """The action needs an earlier one first (e.g. Branch before any token was generated)."""


class GenerationFinishedError(InferenceInputError):
    """A step was asked of a generation that has already ended."""


class PoolFullError(InferenceInputError):
    """No free KV block and no idle cached block to evict: someone must be preempted or wait."""


class RequestTooLargeError(InferenceInputError):
    """A request that needs more KV blocks than the whole pool holds: it can never run."""


class ServerBusyError(InferenceInputError):
    """The server's queue is full: the message says how many requests are ahead."""


class ServerStoppedError(InferenceInputError):
    """The request could not finish (the server stopped or a step failed)."""


class RemoteEngineError(InferenceInputError):
    """The remote engine could not be reached or refused the request (a plain message)."""


class WorkOverBudgetError(InferenceInputError):
    """A measurement whose settings would feed more tokens than one measurement may."""


def check_range(name: str, value: float, low: float, high: float) -> None:
    """Raise SettingOutOfRangeError unless low <= value <= high (and value is a real number)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise SettingOutOfRangeError(f"{name} must be a number between {low:g} and {high:g}.")
    if value != value or not (low <= value <= high):
        raise SettingOutOfRangeError(
            f"{name} must be between {low:g} and {high:g} (got {value!r}).")
