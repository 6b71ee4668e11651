"""Translation of aiokafka's (and the socket layer's) exceptions into the project's error tree.

Every call into aiokafka from this package runs inside :func:`map_errors`, so a foreign exception
never reaches runtime. The mapping, first match wins:

- authentication failures (SASL handshake, wrong password) and authorization failures (topic, group,
  cluster ACLs) -> :class:`~pipeline.errors.KafkaAuthError`, not retryable;
- ``CommitFailedError``, ``RebalanceInProgressError``, ``IllegalGenerationError``,
  ``UnknownMemberIdError`` -> :class:`~pipeline.errors.KafkaCommitFailed`, retried at the next tick;
- connection errors, request timeouts, ``NoBrokersAvailable``, any aiokafka error it marks
  ``retriable``, ``OSError`` and ``TimeoutError`` -> :class:`~pipeline.errors.KafkaUnavailable`;
- any other aiokafka error -> :class:`~pipeline.errors.KafkaError`.

Our own errors pass through untouched. The message names what was being done, then the cause.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from aiokafka import errors as ak

from pipeline.errors import (
    HBaseIngestError,
    KafkaAuthError,
    KafkaCommitFailed,
    KafkaError,
    KafkaUnavailable,
)

__all__ = ["map_errors", "translate"]

_AUTH: tuple[type[BaseException], ...] = tuple(
    cls for cls in (getattr(ak, name, None) for name in (
        "AuthenticationFailedError", "AuthenticationMethodNotSupported", "SaslAuthenticationFailed",
        "TopicAuthorizationFailedError", "GroupAuthorizationFailedError", "ClusterAuthorizationFailedError",
        "TransactionalIdAuthorizationFailed", "IllegalSaslStateError", "UnsupportedSaslMechanismError"))
    if isinstance(cls, type))
_COMMIT: tuple[type[BaseException], ...] = (ak.CommitFailedError, ak.RebalanceInProgressError,
                                            ak.IllegalGenerationError, ak.UnknownMemberIdError)
_UNAVAILABLE: tuple[type[BaseException], ...] = (ak.KafkaConnectionError, ak.NoBrokersAvailable,
                                                 ak.RequestTimedOutError, ak.KafkaTimeoutError)


def translate(exc: BaseException, what: str) -> KafkaError:
    """The project's error for ``exc`` raised while doing ``what`` (not raised: the caller raises it
    ``from exc``)."""
    cause = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
    if isinstance(exc, _AUTH):
        return KafkaAuthError(f"{what}: Kafka refused the client's credentials or permissions ({cause})")
    if isinstance(exc, _COMMIT):
        return KafkaCommitFailed(f"{what}: the group refused the commit ({cause})")
    if isinstance(exc, _UNAVAILABLE) or getattr(exc, "retriable", False) \
            or isinstance(exc, OSError | TimeoutError):
        return KafkaUnavailable(f"{what}: Kafka is unreachable or did not answer in time ({cause})")
    return KafkaError(f"{what}: {cause}")


@contextmanager
def map_errors(what: str) -> Iterator[None]:
    """Run a block of aiokafka calls; raise their failures as the project's errors (see the module
    docstring). ``what`` names the operation in the message (``"commit of group 'g'"``)."""
    try:
        yield
    except HBaseIngestError:
        raise
    except (ak.KafkaError, OSError, TimeoutError) as exc:
        raise translate(exc, what) from exc
