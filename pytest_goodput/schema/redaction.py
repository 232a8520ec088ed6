"""Secrets out of everything the product writes or prints: one function, ``redact``.

Why one layer: secrets enter through several doors (a password in ``--url``, the API-key
variable, a serve command's ``--api-key`` or ``env HF_TOKEN=...``, the environment, and
servers that echo what they were sent) and leave through many (terminal, JUnit XML, JSON
results, Markdown, GitHub annotations, baselines, engine logs, exception messages). Every
sink calls :func:`redact`, so no sink needs to know which door a secret came through.

What is removed:

* every *known* secret value wherever it appears: the values registered with
  :func:`register` (the API key, URL passwords, values of secret flags and assignments in a
  serve command) and the values of environment variables whose names look secret
  (``*TOKEN*``, ``*KEY*``, ``*SECRET*``, ``*PASS*``, ``*CREDENTIAL*``, ``*AUTH*``);
* by shape, secrets never registered: URL user-info (``http://user:pw@host`` becomes
  ``http://***@host``), ``Authorization:`` header values, ``Bearer``/``Basic`` credentials,
  ``--api-key X`` / ``--api-key=X`` / ``--token X``-style arguments and ``NAME=value``
  assignments whose name looks secret.

Pure: no files, no network. The registry is process-wide because the sinks are far from
the inputs (a launched engine's command, a report written at the end of a session).
"""

from __future__ import annotations

import base64
import json
import os
import re
import urllib.parse
from typing import Iterable, Mapping, Optional

__all__ = ["MASK", "redact", "register", "register_command", "register_env", "register_url",
           "secret_name", "known_secrets"]

MASK = "***"
#: Shorter values are not replaced wherever they occur (``1`` or ``no`` would be everywhere).
MIN_SECRET_LEN = 6

_SECRET_WORDS = ("TOKEN", "KEY", "SECRET", "PASSWORD", "PASS", "CREDENTIAL", "AUTH")
#: Values of secret-looking variables that are settings, not secrets.
_NOT_SECRET = {"true", "false", "yes", "no", "on", "off", "none", "null"}
_NOT_A_SECRET_NAME = re.compile(r"TOKENS|TOKENIZER|KEEP|PASSES|BYPASS")
_VALUE = r"[^\s\"'\\,;&]+"
_FLAG = re.compile(
    r"(--?[\w-]*(?:key|token|secret|password|passwd|pass|credential|auth)[\w-]*)(=|\s+)"
    r"(?!-)(" + _VALUE + ")", re.I)
_ASSIGN = re.compile(
    r"\b([A-Za-z_]\w*(?:KEY|TOKEN|SECRET|PASSWORD|PASSWD|PASS|CREDENTIAL|AUTH)\w*)=(" + _VALUE + ")",
    re.I)
_URL_USERINFO = re.compile(r"([a-zA-Z][\w+.-]*://)[^/@\s\"'<>]+@")
_AUTH_HEADER = re.compile(
    r"((?:Proxy-)?Authorization[\"']?\s*[:=]\s*[\"']?)(?:(Bearer|Basic|Token|Digest)\s+)?(" + _VALUE + ")",
    re.I)
_SCHEME_CRED = re.compile(r"\b(Bearer|Basic)\s+([A-Za-z0-9._~+/=-]{6,})")

_registered: set[str] = set()


def secret_name(name: str) -> bool:
    """Whether a variable's or flag's name says its value is a secret.

    Not names of settings that merely mention one: ``*_ENV`` (the name of the API-key
    variable), token counts and tokenizers (``--max-tokens``, ``--tokenizer``).
    """
    upper = name.upper().replace("-", "_")
    return (any(w in upper for w in _SECRET_WORDS) and not upper.endswith("_ENV")
            and _NOT_A_SECRET_NAME.search(upper) is None)


def _worth_replacing(value: str) -> bool:
    """Long enough, and not a flag or a number (replacing those would corrupt output)."""
    v = value.strip()
    if len(v) < MIN_SECRET_LEN or v.lower() in _NOT_SECRET:
        return False
    try:
        float(v)
    except ValueError:
        return True
    return False


def register(*values: Optional[str]) -> None:
    """Remember secret values so that :func:`redact` removes them wherever they appear."""
    for value in values:
        if value and _worth_replacing(value):
            _registered.add(value)


def register_env(name: Optional[str], env: Optional[Mapping[str, str]] = None) -> None:
    """Register the value of the environment variable ``name`` (the API-key variable)."""
    if name:
        register((os.environ if env is None else env).get(name))


def register_url(url: Optional[str]) -> None:
    """Register a URL's password, its ``user:password`` and their Basic-auth encoding."""
    if not url:
        return
    try:
        parts = urllib.parse.urlsplit(url)
        user, password = parts.username, parts.password
    except ValueError:
        return
    if password:
        for pair in (f"{user or ''}:{password}",
                     f"{urllib.parse.unquote(user or '')}:{urllib.parse.unquote(password)}"):
            register(pair, base64.b64encode(pair.encode()).decode())
        register(password, urllib.parse.unquote(password))
    elif user:
        register(user, urllib.parse.unquote(user))


def register_command(command: str) -> None:
    """Register the values of secret flags and secret ``NAME=value`` assignments in a command."""
    for m in _FLAG.finditer(command):
        if secret_name(m.group(1).lstrip("-")):
            register(m.group(3))
    for m in _ASSIGN.finditer(command):
        if secret_name(m.group(1)):
            register(m.group(2))
    for m in _URL_USERINFO.finditer(command):
        register_url(command[m.start():].split()[0])


def known_secrets(env: Optional[Mapping[str, str]] = None) -> list[str]:
    """Registered secrets and secret-looking environment values, longest first."""
    env = os.environ if env is None else env
    found = set(_registered)
    found.update(v for k, v in env.items() if secret_name(k) and _worth_replacing(v))
    return sorted(found, key=len, reverse=True)


def redact(text: str, env: Optional[Mapping[str, str]] = None,
           extra: Iterable[Optional[str]] = ()) -> str:
    """``text`` with every secret replaced by ``***`` (see the module's docstring)."""
    if not text:
        return text
    secrets = known_secrets(env) + sorted((s for s in extra if s and _worth_replacing(s)),
                                          key=len, reverse=True)
    for secret in secrets:
        if secret in text:
            text = text.replace(secret, MASK)
        escaped = json.dumps(secret)[1:-1]  # as it appears inside a JSON string
        if escaped != secret and escaped in text:
            text = text.replace(escaped, MASK)
    text = _URL_USERINFO.sub(r"\1" + MASK + "@", text)
    text = _AUTH_HEADER.sub(lambda m: m.group(1) + (f"{m.group(2)} " if m.group(2) else "") + MASK,
                            text)
    text = _SCHEME_CRED.sub(lambda m: f"{m.group(1)} {MASK}", text)
    text = _FLAG.sub(lambda m: _masked(m, m.group(1), f"{m.group(1)}{m.group(2)}{MASK}"), text)
    return _ASSIGN.sub(lambda m: _masked(m, m.group(1), f"{m.group(1)}={MASK}"), text)


def _masked(m: re.Match[str], name: str, masked: str) -> str:
    """A ``name value`` pair masked, unless the name or the value shows it is no secret."""
    value = m.group(m.lastindex or 0)
    if not secret_name(name.lstrip("-")) or not _worth_replacing(value) or value == MASK:
        return m.group(0)
    return masked
