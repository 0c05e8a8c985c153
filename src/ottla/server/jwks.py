"""The keys OAUTHBEARER tokens are checked against: ``sasl.oauthbearer.jwks.endpoint.url``,
a ``file:`` URL (read again when the file changes, so a rotated key set needs no restart)
or an ``https:``/``http:`` one (fetched before the listener serves, then again every
``sasl.oauthbearer.jwks.endpoint.refresh.ms`` on a thread of its own, never on the event
loop)."""

from __future__ import annotations

import logging
import os
import threading
import urllib.parse
import urllib.request

import jwt

from ottla.common.config import ConfigError

log = logging.getLogger(__name__)


class JwksKeys:
    def __init__(self, url: str, refresh_ms: int = 3_600_000) -> None:
        self.url = url
        parsed = urllib.parse.urlparse(url)
        self.path = urllib.parse.unquote(parsed.path) if parsed.scheme == "file" else None
        if parsed.scheme not in ("file", "http", "https"):
            raise ConfigError(f"sasl.oauthbearer.jwks.endpoint.url {url}: a file:, https: "
                              "or http: URL is expected")
        self.refresh_s = max(refresh_ms, 1000) / 1000
        self._mtime: float | None = None
        self._keys = self._load()
        if self.path is None:
            self._schedule()

    def __call__(self) -> jwt.PyJWKSet:
        if self.path is not None:
            try:
                mtime = os.stat(self.path).st_mtime
            except OSError:
                return self._keys  # keep the last good set
            if mtime != self._mtime:
                try:
                    self._keys = self._load()
                except ConfigError as e:
                    log.warning("Keeping the previous JWKS: %s", e)
        return self._keys

    def _load(self) -> jwt.PyJWKSet:
        try:
            if self.path is not None:
                self._mtime = os.stat(self.path).st_mtime
                with open(self.path, encoding="utf-8") as f:
                    text = f.read()
            else:
                with urllib.request.urlopen(self.url, timeout=10) as response:
                    text = response.read().decode("utf-8")
            return jwt.PyJWKSet.from_json(text)
        except (OSError, ValueError, jwt.PyJWKSetError) as e:
            raise ConfigError(f"sasl.oauthbearer.jwks.endpoint.url {self.url}: cannot read a "
                              f"JWKS: {e}") from e

    def _schedule(self) -> None:
        timer = threading.Timer(self.refresh_s, self._refresh)
        timer.daemon = True
        timer.start()

    def _refresh(self) -> None:
        try:
            self._keys = self._load()
        except ConfigError as e:
            log.warning("Keeping the previous JWKS: %s", e)
        self._schedule()
