"""Translation of aiokafka's (and the socket layer's) exceptions into the project's error tree.

Every call into aiokafka from this package runs inside :func:`map_errors`, so a foreign exception
never reaches runtime. The mapping, first match wins:

- authorization failures (topic, group, cluster ACLs) -> :class:`~pipeline.errors.KafkaAuthError`
  naming the kind of resource and its name when aiokafka gives it ("not authorized: ... group 'g'");
- authentication failures (SASL handshake, wrong password) -> :class:`~pipeline.errors.KafkaAuthError`,
  not retryable (a failed bootstrap on a secured listener is diagnosed by
  :func:`connectors.kafka.security.start_client`);
- ``CommitFailedError``, ``RebalanceInProgressError``, ``IllegalGenerationError``,
  ``UnknownMemberIdError`` -> :class:`~pipeline.errors.KafkaCommitFailed`, retried at the next tick;
- connection errors, request timeouts, ``NoBrokersAvailable``, any aiokafka error it marks
  ``retriable``, ``OSError`` and ``TimeoutError`` -> :class:`~pipeline.errors.KafkaUnavailable`;
- any other aiokafka error -> :class:`~pipeline.errors.KafkaError`.

Before all of these: under a GSSAPI login, a failure whose cause is the login (a GSSAPI error in the chain,
the keytab gone: :func:`connectors.kafka.kerberos.login_problem`) -> :class:`~pipeline.errors.KafkaAuthError`
naming it (:class:`~pipeline.errors.KafkaUnavailable`, retried, when the KDC did not answer). Our own errors
pass through untouched. The message names what was being done, then the cause.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from aiokafka import errors as ak

from connectors.kafka.kerberos import login_problem
from connectors.kerberos import KDC_UNREACHABLE, is_gss_error
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
#: authorization failures (a missing ACL) -> the kind of resource refused
_DENIED: dict[type[BaseException], str] = {
    ak.TopicAuthorizationFailedError: "topic", ak.GroupAuthorizationFailedError: "group",
    ak.ClusterAuthorizationFailedError: "cluster", ak.TransactionalIdAuthorizationFailed: "transactional id"}


def _names(exc: BaseException) -> list[object]:
    """The resource names aiokafka put in an authorization error's arguments (a group id, a set of topics)."""
    found: list[object] = []
    for arg in exc.args:
        if isinstance(arg, set | frozenset | list | tuple):
            found.extend(sorted(arg, key=str))
        elif isinstance(arg, str) and arg and not arg.startswith("["):
            found.append(arg)
    return found


_COMMIT: tuple[type[BaseException], ...] = (ak.CommitFailedError, ak.RebalanceInProgressError,
                                            ak.IllegalGenerationError, ak.UnknownMemberIdError)
_UNAVAILABLE: tuple[type[BaseException], ...] = (ak.KafkaConnectionError, ak.NoBrokersAvailable,
                                                 ak.RequestTimedOutError, ak.KafkaTimeoutError)


def translate(exc: BaseException, what: str) -> KafkaError:
    """The project's error for ``exc`` raised while doing ``what`` (not raised: the caller raises it
    ``from exc``)."""
    cause = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
    if isinstance(exc, tuple(_DENIED)):
        resource = _DENIED.get(type(exc), "resource")
        named = f" {resource} {', '.join(repr(str(a)) for a in _names(exc))}" if _names(exc) else f" the {resource}"
        return KafkaAuthError(f"{what}: not authorized: Kafka's ACLs refuse this user access to{named} "
                              f"({type(exc).__name__}); grant the user an ACL for it")
    if isinstance(exc, _AUTH):
        return KafkaAuthError(f"{what}: Kafka refused the client's credentials or permissions ({cause})")
    if isinstance(exc, _COMMIT):
        return KafkaCommitFailed(f"{what}: the group refused the commit ({cause})")
    if isinstance(exc, _UNAVAILABLE) or getattr(exc, "retriable", False) \
            or isinstance(exc, OSError | TimeoutError):
        return KafkaUnavailable(f"{what}: Kafka is unreachable or did not answer in time ({cause})")
    return KafkaError(f"{what}: {cause}")


def _login_error(what: str, problem: str) -> KafkaError:
    """A failed login: KafkaUnavailable (retried) when the KDC did not answer, else KafkaAuthError."""
    if any(words in problem for words in KDC_UNREACHABLE):
        return KafkaUnavailable(f"{what}: {problem}")
    return KafkaAuthError(f"{what}: {problem}")


@contextmanager
def map_errors(what: str) -> Iterator[None]:
    """Run a block of aiokafka calls; raise their failures as the project's errors (see the module
    docstring). ``what`` names the operation in the message (``"commit of group 'g'"``)."""
    try:
        yield
    except HBaseIngestError:
        raise
    except (ak.KafkaError, OSError, TimeoutError) as exc:
        problem = login_problem(exc)
        if problem is not None:
            raise _login_error(what, problem) from exc
        raise translate(exc, what) from exc
    except Exception as exc:  # gssapi's own errors escape aiokafka's GSSAPI login as they are
        problem = login_problem(exc) if is_gss_error(exc) else None
        if problem is None:
            raise
        raise _login_error(what, problem) from exc
