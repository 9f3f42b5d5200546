# -*- coding: utf-8 -*-
# Copyright: glm53.tensorfold contributors
# Apache License 2.0 (see LICENSE)
"""An image archive streamed into the Docker Engine as it arrives: the body of ``POST /images/load``
on the engine's unix socket, sent in chunks (RFC 9112 chunked framing) while the archive is still
being received from another host, so the archive is never written to the host's disk.

The daemon loads only a body that ends properly: ``commit`` sends the last (empty) chunk and reads
the daemon's answer; ``abort`` closes the connection without it, and the daemon discards what it
had read (the transfer broke off, or the bytes were not the ones expected). The answer to a load is
a stream of JSON objects (Docker Engine API, ImageLoad): ``{"stream": "Loaded image: REF\\n"}`` or
``{"stream": "Loaded image ID: sha256:...\\n"}`` per image, ``{"error": ...}`` when the load failed
after the daemon had answered 200; a refused request answers an error status with ``{"message": ...}``."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import hashlib
import json
import socket
from urllib.parse import quote

from ansible_collections.glm53.tensorfold.plugins.module_utils import net


class LoadError(Exception):
    """The Docker Engine refused or failed the load; ``what`` is the operator's sentence."""

    def __init__(self, what):
        super(LoadError, self).__init__(what)
        self.what = what


def socket_path(docker_host):
    """The socket file of a ``unix://`` docker_host (the only kind this module speaks)."""
    if not str(docker_host).startswith("unix://"):
        raise ValueError("only a unix:// docker_host is supported, got %r" % docker_host)
    return docker_host[len("unix://"):]


def loaded(body):
    """What a load's answer says: (the image references and ids it names, the error it reports or
    None). Lines that are not JSON objects are passed over."""
    names, error = [], None
    for line in body.decode("utf-8", "replace").splitlines():
        try:
            item = json.loads(line)
        except ValueError:
            continue
        if not isinstance(item, dict):
            continue
        if item.get("error") or item.get("errorDetail"):
            detail = item.get("errorDetail") if isinstance(item.get("errorDetail"), dict) else {}
            error = str(item.get("error") or detail.get("message") or "an error without a message")
            continue
        text = str(item.get("stream") or "").strip()
        for prefix in ("Loaded image ID: ", "Loaded image: "):
            if text.startswith(prefix):
                names.append(text[len(prefix):].strip())
                break
    return names, error


def refusal(status, body):
    """The sentence of an error status answered to a request (``{"message": ...}`` as the Engine
    API answers errors, else the start of the body)."""
    try:
        message = json.loads(body.decode("utf-8", "replace")).get("message")
    except (ValueError, AttributeError):
        message = None
    return "the Docker Engine answered HTTP %d: %s" % (status, message or body[:200].decode("utf-8", "replace").strip())


# The stream's last bytes are held back until ``commit``: an archive ends with the tar's end marker,
# and a daemon that stopped reading there could load before the body ended. Without its last bytes
# the archive is cut short, whatever the daemon reads.
HOLD = 64 * 1024


class DockerLoad:
    """One ``POST /images/load`` whose body is written piece by piece (``write``), then ended
    (``commit``: the daemon's answer) or dropped (``abort``: nothing is loaded)."""

    def __init__(self, path, timeout):
        self.tail = b""
        self.sock = net.unix_connect(path, timeout)
        head = ("POST /images/load?quiet=1 HTTP/1.1\r\nHost: docker\r\nContent-Type: application/x-tar\r\n"
                "Transfer-Encoding: chunked\r\nConnection: close\r\n\r\n")
        try:
            self.sock.sendall(head.encode("latin-1"))
        except OSError:
            self.sock.close()
            raise

    def write(self, piece):
        """Send a bytes-like object (or a list of them) as one chunk, all but the stream's last HOLD
        bytes so far; return the byte count taken. A daemon that stopped reading (it refused the
        load) raises LoadError with its answer."""
        view = memoryview(b"".join(piece) if isinstance(piece, list) else piece).cast("B")
        count = len(view)
        if count >= HOLD:
            out, self.tail = [self.tail, view[:count - HOLD]], bytes(view[count - HOLD:])
        else:
            joined = self.tail + bytes(view)
            out, self.tail = [joined[:-HOLD]], joined[-HOLD:]
        self._send(out)
        return count

    def _send(self, blocks):
        size = sum(len(block) for block in blocks)
        if not size:
            return
        try:
            self.sock.sendall(b"%x\r\n" % size)
            for block in blocks:
                self.sock.sendall(block)
            self.sock.sendall(b"\r\n")
        except OSError as exc:
            raise LoadError(self._answer_after(exc))

    def commit(self):
        """End the body and read the daemon's answer: the references and ids it loaded. A refusal or
        a failed load raises LoadError."""
        self._send([self.tail])
        try:
            self.sock.sendall(b"0\r\n\r\n")
            with self.sock.makefile("rb") as stream:
                status, body = net.read_answer(stream)
        except OSError as exc:
            raise LoadError("the Docker Engine did not answer the load: %s" % exc)
        finally:
            self.sock.close()
        if status != 200:
            raise LoadError(refusal(status, body))
        names, error = loaded(body)
        if error:
            raise LoadError("the Docker Engine could not load the image: %s" % error)
        return names

    def abort(self):
        """Drop the load: the connection closes before the body's end, so the daemon loads nothing."""
        try:
            self.sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self.sock.close()

    def _answer_after(self, exc):
        """The daemon's reason when it closed the connection while the body was being sent."""
        try:
            self.sock.settimeout(5)
            with self.sock.makefile("rb") as stream:
                status, body = net.read_answer(stream)
        except OSError:
            return "the Docker Engine stopped reading the image (%s)" % exc
        finally:
            self.sock.close()
        if status != 200:
            return refusal(status, body)
        return "the Docker Engine stopped reading the image: %s" % (loaded(body)[1] or exc)


# What an image's inspection holds that Docker's two image stores both read from the image's
# configuration. The id is not one of them: the graphdriver store's is the configuration's digest,
# the containerd store's (Docker Engine 29's default on a fresh install) the manifest's, so one
# image has two ids across a fleet of both. How the image runs, not the build's record of itself.
IDENTITY_CONFIG_KEYS = ("Entrypoint", "Cmd", "Env", "WorkingDir", "User", "Labels")


def identity(inspect):
    """The identity of the image an inspection (``GET /images/NAME/json``, docker_image_info's
    ``images[]``) describes, the same whichever image store holds it: a sha256 over its platform,
    its layers' digests (of their uncompressed content) and how it runs; an empty setting counts
    as absent (one store may give null where the other gives [] or {})."""
    config = inspect.get("Config") or {}
    described = {"os": inspect.get("Os") or "", "architecture": inspect.get("Architecture") or "",
                 "variant": inspect.get("Variant") or "",
                 "layers": list((inspect.get("RootFS") or {}).get("Layers") or []),
                 "config": dict((key, config[key]) for key in IDENTITY_CONFIG_KEYS if config.get(key))}
    text = json.dumps(described, sort_keys=True, separators=(",", ":"))
    return "sha256:" + hashlib.sha256(text.encode("utf-8")).hexdigest()


def inspect_image(path, ref, timeout):
    """The inspection of the image ``ref`` names in the engine at the socket ``path``, or None when it has none."""
    status, body = net.unix_get(path, "/images/%s/json" % quote(ref, safe=":/"), timeout)
    if status == 404:
        return None
    if status != 200:
        raise LoadError(refusal(status, body))
    try:
        found = json.loads(body.decode("utf-8"))
        if isinstance(found, dict) and found.get("Id"):
            return found
    except ValueError:
        pass
    raise LoadError("the Docker Engine's answer about %s is no image inspection" % ref)


def named_image(path, ref, timeout):
    """The id and the identity of the image ``ref`` names in the engine at ``path``: (None, None) when none."""
    found = inspect_image(path, ref, timeout)
    return (found["Id"], identity(found)) if found else (None, None)
