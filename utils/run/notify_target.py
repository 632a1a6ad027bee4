"""Where `notify:` delivers: the checks done when a config loads, and the masking of the
secrets a webhook URL carries.

A webhook URL often carries its credential: `https://user:TOKEN@host/...` or
`...?token=TOKEN`. rltrain writes URLs in config.yaml, command.txt, TensorBoard's config
text, events.jsonl and console messages; each of those gets `mask_url`'s form, with the
userinfo and every query value replaced by `***`. Only the checkpoint's config keeps the
URL as given; it holds the run's weights, so is private anyway (a resume delivers only
to a URL its own --set gives: scripts/training/resume.py).
"""

from __future__ import annotations

import re
import shlex
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from rltrain.utils.config.schema import NotifyConfig
from rltrain.utils.errors import ConfigError

MASK = "***"
# An http(s) URL inside a longer text (a `--set notify.url=...` on a command line).
URL_IN_TEXT = re.compile(r"https?://[^\s'\"]+")


def mask_url(url: str) -> str:
    """`url` with its userinfo and query values replaced by `***` (keys kept)."""
    try:
        parts = urlsplit(url)
        host = parts.hostname or ""
        port = parts.port
    except ValueError:  # not a URL one can take apart: show none of it
        return MASK
    host = f"[{host}]" if ":" in host else host  # IPv6
    netloc = (f"{MASK}@" if "@" in parts.netloc else "") + host + (f":{port}" if port else "")
    query = parts.query
    if query:
        pairs = parse_qsl(query, keep_blank_values=True)
        query = (urlencode([(key, MASK) for key, _ in pairs], safe="*") if pairs else MASK)
    return urlunsplit((parts.scheme, netloc, parts.path, query, MASK if parts.fragment else ""))


def mask_text(text: str) -> str:
    """Every http(s) URL in `text` masked."""
    return URL_IN_TEXT.sub(lambda match: mask_url(match.group(0)), text)


def mask_config_dict(plain: dict[str, Any]) -> dict[str, Any]:
    """A copy of a plain config dict (`config_to_dict`) with notify.url masked."""
    notify = plain.get("notify")
    if not isinstance(notify, dict) or not notify.get("url"):
        return plain
    return {**plain, "notify": {**notify, "url": mask_url(str(notify["url"]))}}


def split_url_credentials(url: str) -> tuple[str, str | None]:
    """The URL without its userinfo, and the userinfo (`user:password`) if it had one:
    urllib sends no userinfo itself, it goes as a Basic Authorization header."""
    parts = urlsplit(url)
    if "@" not in parts.netloc:
        return url, None
    userinfo, _, hostport = parts.netloc.rpartition("@")
    return urlunsplit(parts._replace(netloc=hostport)), userinfo


def command_argv(command: str) -> list[str]:
    """The notify command as an argv list, split as a POSIX shell would (no shell runs)."""
    return shlex.split(command)


def check_notify(notify: NotifyConfig) -> None:
    """Refuse a URL urllib could not POST to and a command that does not split."""
    if notify.url is not None:
        _check_url(notify.url)
    if notify.command is not None:
        try:
            argv = command_argv(notify.command)
        except ValueError as exc:
            raise ConfigError(f"config key 'notify.command' cannot be split into a command "
                              f"and its arguments: {exc}") from None
        if not argv:
            raise ConfigError("config key 'notify.command' names no command")
    if len(set(notify.on)) != len(notify.on):
        raise ConfigError("config key 'notify.on' names an event twice")


def _check_url(url: str) -> None:
    shown = mask_url(url)
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 (raises ValueError on a port that is not a number)
    except ValueError:
        raise ConfigError(f"config key 'notify.url' is not a URL: {shown}") from None
    if parts.scheme not in ("http", "https"):
        raise ConfigError(f"config key 'notify.url' must be an http:// or https:// URL; "
                          f"got {shown}")
    if not parts.hostname:
        raise ConfigError(f"config key 'notify.url' names no host: {shown}")
    if any(c.isspace() for c in url):
        raise ConfigError(f"config key 'notify.url' must not contain spaces: {shown}")
