# -*- coding: utf-8 -*-
# Copyright: glm53.tensorfold contributors
# Apache License 2.0 (see LICENSE)
"""The air-gapped bundle: items, their files' sha256, the manifest, resumable copies, verification.

A bundle is one folder. Each item is a sub-folder (``weights/model``, ``image``, ``toolkit``...)
whose every file is listed with its size and sha256; ``MANIFEST.json`` at the top lists every
item with its total size and a sha256 over its file list, plus what the item is (repository and
revision, image id and tag, package version). Layout of the bookkeeping, never carried as items:

``.state/items/NAME.json``  the record of one item as its part of the build left it (the manifest
                            is assembled from these, so parts can be built and resumed one by one)
``.state/collection.json``  the collection tarball's name and the sha256 of the members it was
                            packed from (bundle_collection packs again when they differ)
``.state/hashes.json``      sha256 already computed, keyed by path, size, mtime, ctime and inode:
                            a file that was not written since is not read again (a write, even one
                            that restores the mtime, moves the ctime)

Pure functions and small file helpers; the modules ``bundle_item``, ``bundle_manifest``,
``bundle_verify`` and ``bundle_apt_mirror`` are thin doors onto them.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import hashlib
import json
import os
import re
import shutil
import tarfile

FORMAT = 1
MANIFEST = "MANIFEST.json"
STATE = ".state"
READ_BLOCK = 1024 * 1024
COPY_COMMIT = 16 * 1024 * 1024
_ITEM_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*(/[A-Za-z0-9][A-Za-z0-9._-]*)*$")


def module_args(**own):
    """The bundle_* modules' options: the shared ones (doc fragment glm53.tensorfold.bundle) and their own."""
    args = dict(root=dict(type="path", required=True), host_label=dict(type="str"))
    args.update(own)
    return args


class BundleError(Exception):
    """A bundle problem: ``what`` names the item (and file) and says what is wrong."""

    def __init__(self, what, items=None):
        Exception.__init__(self, what)
        self.what = what
        self.items = items or []


# --- names and small files -------------------------------------------------------------------
def check_item_name(name):
    """An item is a relative folder of plain names: no '..', no absolute path, no .state."""
    if not _ITEM_RE.match(name or "") or name.split("/")[0] == STATE:
        raise BundleError("%r is not a bundle item name (a relative folder such as weights/model)" % (name,))
    return name


def load_json(path, default):
    try:
        with open(path) as handle:
            return json.load(handle)
    except (OSError, ValueError):
        return default


def write_json_if_changed(path, data):
    """Write ``data`` (sorted, indented) atomically unless the file already holds exactly it."""
    text = json.dumps(data, sort_keys=True, indent=2) + "\n"
    try:
        with open(path) as handle:
            if handle.read() == text:
                return False
    except OSError:
        pass
    folder = os.path.dirname(path)
    if folder and not os.path.isdir(folder):
        os.makedirs(folder, 0o755)
    tmp = path + ".tmp"
    with open(tmp, "w") as handle:
        handle.write(text)
        handle.flush()
        os.fsync(handle.fileno())
    os.chmod(tmp, 0o644)
    os.rename(tmp, path)
    return True


# --- hashing ---------------------------------------------------------------------------------
def stat_key(relpath, st):
    """The cache key of a file's sha256: changes whenever the file could have been written."""
    return "%s|%d|%d|%d|%d" % (relpath, st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino)


class Hasher:
    """sha256 of files under a root, with the cache in ``.state/hashes.json``.

    ``use_cache=False`` re-reads every file (``--tags verify``); the cache is still refreshed.
    ``bytes_read`` counts what was read, so a rebuild with nothing changed can show 0.
    """

    def __init__(self, root, use_cache=True, path=None):
        self.root = root
        self.use_cache = use_cache
        self.path = path or os.path.join(root, STATE, "hashes.json")
        self.cache = load_json(self.path, {}) if use_cache else {}
        self.fresh = {}
        self.bytes_read = 0

    def sha256(self, relpath):
        full = os.path.join(self.root, relpath)
        st = os.stat(full)
        key = stat_key(relpath, st)
        if self.use_cache and key in self.cache:
            self.fresh[key] = self.cache[key]
            return self.cache[key]
        digest = hashlib.sha256()
        with open(full, "rb") as handle:
            while True:
                block = handle.read(READ_BLOCK)
                if not block:
                    break
                digest.update(block)
                self.bytes_read += len(block)
        self.fresh[key] = digest.hexdigest()
        return self.fresh[key]

    def save(self, keep_prefixes=None):
        """Keep the keys seen by this run (and others' under other item prefixes)."""
        merged = dict(load_json(self.path, {}))
        if keep_prefixes is not None:
            merged = dict((k, v) for k, v in merged.items()
                          if not any(k.startswith(p + "/") for p in keep_prefixes))
        merged.update(self.fresh)
        if os.path.isdir(self.root):
            return write_json_if_changed(self.path, merged)
        return False


def hash_cache_path(root, fallback_dir):
    """Where a check of the bundle at ``root`` keeps its sha256 cache: ``.state/hashes.json`` in
    the bundle, whose ``.state`` a tarball leaves out (it is made again), unless the bundle cannot
    be written (read-only media, with or without its ``.state``); then a file of its own, named
    after root, in ``fallback_dir``."""
    state = os.path.join(root, STATE)
    if os.access(state if os.path.isdir(state) else root, os.W_OK):
        return os.path.join(root, STATE, "hashes.json")
    name = hashlib.sha256(os.path.abspath(root).encode("utf-8")).hexdigest()[:16]
    return os.path.join(fallback_dir, "hashes-%s.json" % name)


def list_files(folder):
    """Every regular file under folder, as sorted relative paths ('/' separated)."""
    found = []
    for here, dirs, files in os.walk(folder):
        dirs.sort()
        for name in files:
            full = os.path.join(here, name)
            if os.path.isfile(full) and not os.path.islink(full):
                found.append(os.path.relpath(full, folder).replace(os.sep, "/"))
    return sorted(found)


def tree_sha256(files):
    """One sha256 for an item: over 'sha256  size  path' lines of its files, sorted by path."""
    digest = hashlib.sha256()
    for entry in sorted(files, key=lambda f: f["path"]):
        digest.update(("%s  %d  %s\n" % (entry["sha256"], entry["size"], entry["path"])).encode("utf-8"))
    return digest.hexdigest()


def describe_item(root, name, kind, meta, hasher, exclude=()):
    """The record of one item: its files (size, sha256), total size and tree sha256."""
    check_item_name(name)
    folder = os.path.join(root, name)
    if not os.path.isdir(folder):
        raise BundleError("%s: the folder %s is missing" % (name, folder), [name])
    files = []
    for rel in list_files(folder):
        if any(rel == e or rel.startswith(e.rstrip("/") + "/") for e in exclude):
            continue
        size = os.path.getsize(os.path.join(folder, rel))
        files.append({"path": rel, "size": size, "sha256": hasher.sha256(name + "/" + rel)})
    if not files:
        raise BundleError("%s: the folder %s holds no file" % (name, folder), [name])
    return {"name": name, "kind": kind, "meta": meta or {}, "files": files,
            "size": sum(f["size"] for f in files), "sha256": tree_sha256(files)}


# --- resumable copy --------------------------------------------------------------------------
def same_file(src, dst):
    """True when dst exists with src's size and bytes (checked by size, then sha256)."""
    try:
        if os.path.getsize(src) != os.path.getsize(dst):
            return False
    except OSError:
        return False
    return file_sha256(src) == file_sha256(dst)


def file_sha256(path):
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(READ_BLOCK), b""):
            digest.update(block)
    return digest.hexdigest()


def copy_resumable(src, dst, commit_bytes=COPY_COMMIT):
    """Copy src to dst through ``dst.partial``; a killed copy continues where it was fsynced.

    The partial file's committed length is written to ``dst.partial.offset`` only after an fsync,
    so bytes after it may be torn and are dropped. Returns bytes written by this call (0 when dst
    already holds src's content). The source's bytes are compared with what is on disk at the
    end (size, then sha256), and the file is renamed into place only then.
    """
    if os.path.exists(dst) and same_file(src, dst):
        return False, 0
    folder = os.path.dirname(dst)
    if folder and not os.path.isdir(folder):
        os.makedirs(folder, 0o755)
    part, mark = dst + ".partial", dst + ".partial.offset"
    size = os.path.getsize(src)
    committed = 0
    if os.path.exists(part):
        try:
            with open(mark) as handle:
                committed = int(handle.read().strip() or 0)
        except (OSError, ValueError):
            committed = 0
        if committed > min(os.path.getsize(part), size):
            committed = 0
    written = 0
    with open(src, "rb") as source, open(part, "ab" if committed else "wb") as out:
        out.truncate(committed)
        out.seek(committed)
        source.seek(committed)
        since = 0
        for block in iter(lambda: source.read(READ_BLOCK), b""):
            out.write(block)
            written += len(block)
            since += len(block)
            if since >= commit_bytes:
                out.flush()
                os.fsync(out.fileno())
                _write_mark(mark, committed + written)
                since = 0
        out.flush()
        os.fsync(out.fileno())
    if file_sha256(part) != file_sha256(src):
        os.unlink(part)
        _remove(mark)
        raise BundleError("%s: the copy of %s does not match its source; run again" % (dst, src))
    os.chmod(part, 0o644)
    os.rename(part, dst)
    _remove(mark)
    return True, written


def _write_mark(path, offset):
    tmp = path + ".tmp"
    with open(tmp, "w") as handle:
        handle.write("%d\n" % offset)
        handle.flush()
        os.fsync(handle.fileno())
    os.rename(tmp, path)


def _remove(path):
    try:
        os.unlink(path)
    except OSError:
        pass


def source_files(src):
    """The item-relative files src brings: a file's own name, or every file of a folder."""
    return [os.path.basename(src)] if os.path.isfile(src) else list_files(src)


def copy_pairs(src, dst):
    """(source file, target file) for each file src brings into the item folder dst."""
    if os.path.isfile(src):
        return [(src, os.path.join(dst, os.path.basename(src)))]
    return [(os.path.join(src, rel), os.path.join(dst, rel)) for rel in list_files(src)]


def copy_tree(src, dst):
    """Copy every file of folder src into dst (resumable per file). Returns (files, bytes) copied."""
    files = total = 0
    for source, target in copy_pairs(src, dst):
        copied, written = copy_resumable(source, target)
        files += 1 if copied else 0
        total += written
    return files, total


def _under(rel, prefixes):
    return any(rel == p.rstrip("/") or rel.startswith(p.rstrip("/") + "/") for p in prefixes)


def prune_plan(present, wanted, keep=(), nested=()):
    """The files of an item to remove so that it holds only ``wanted`` (what its source brings)
    and what ``keep`` names (files or folders another step writes, such as weights' files/).
    Files of items nested in this one (``nested``, relative to it) are theirs, never removed."""
    wanted = set(wanted)
    return [rel for rel in present
            if rel not in wanted and not _under(rel, keep) and not _under(rel, nested)]


def nested_items(root, name):
    """The recorded items inside item ``name``, relative to it (weights/ holding weights/model)."""
    folder = os.path.join(root, STATE, "items")
    names = []
    if os.path.isdir(folder):
        for entry in sorted(os.listdir(folder)):
            other = load_json(os.path.join(folder, entry), {}).get("name", "") if entry.endswith(".json") else ""
            if other.startswith(name + "/"):
                names.append(other[len(name) + 1:])
    return names


def prune_item(root, name, wanted, keep=(), dry_run=False):
    """Remove what an earlier build left in the item and its source no longer has (a renamed
    patch, an older tarball or listing), then the folders that became empty. Returns the removed."""
    folder = os.path.join(root, name)
    if not os.path.isdir(folder):
        return []
    removed = prune_plan(list_files(folder), wanted, keep, nested_items(root, name))
    if dry_run:
        return removed
    for rel in removed:
        os.unlink(os.path.join(folder, rel))
    for here, dirs, files in os.walk(folder, topdown=False):
        if here != folder and not os.listdir(here):
            os.rmdir(here)
    return removed


def damaged_files(root, name, record, hasher):
    """The files of an item's last record whose bytes on disk differ from it (written since it was
    recorded: a truncated archive, a flipped byte), each ``{"path", "what"}``. A missing file is
    not damaged: its part makes it again. The sha256 cache spares reading any file not written
    since it was hashed."""
    damaged = []
    folder = os.path.join(root, name)
    for entry in (record or {}).get("files", []):
        path = os.path.join(folder, entry["path"])
        if not os.path.isfile(path):
            continue
        size = os.path.getsize(path)
        if size != entry["size"]:
            damaged.append({"path": entry["path"], "what": "%s/%s has %d bytes, its record says %d" % (
                name, entry["path"], size, entry["size"])})
        elif hasher.sha256(name + "/" + entry["path"]) != entry["sha256"]:
            damaged.append({"path": entry["path"], "what": "%s/%s sha256 differs from its record" % (name, entry["path"])})
    return damaged


# --- manifest and verification ---------------------------------------------------------------
def item_record_path(root, name):
    return os.path.join(root, STATE, "items", name.replace("/", "__") + ".json")


def assemble_manifest(records, meta=None, missing=()):
    """The top manifest from the item records: every item with kind, size, sha256, files, meta,
    and the items the bundle should hold but no part has built yet (``missing``)."""
    items = {}
    for record in records:
        items[record["name"]] = dict((k, record[k]) for k in ("kind", "meta", "files", "size", "sha256"))
    return {"format": FORMAT, "meta": meta or {}, "items": items, "missing": sorted(missing),
            "size": sum(i["size"] for i in items.values())}


def version_problem(manifest, wanted):
    """A bundle built by another version of the collection than the one reading it: what is wrong, or None."""
    built = (manifest.get("meta") or {}).get("collection_version")
    if not wanted or built == wanted:
        return None
    return "the bundle was built by glm53.tensorfold %s, this controller runs %s" % (
        built or "of an unrecorded version", wanted)


def verify_bundle(root, manifest, hasher, names=None):
    """Re-hash the bundle's files against the manifest.

    Returns a list of problems, one per wrong item: ``{"item", "what"}`` where ``what`` names
    each wrong file (missing, size, sha256) and files the manifest does not list.
    """
    problems = []
    items = manifest.get("items", {})
    if names is None:  # everything the bundle should hold, built or not
        names = sorted(set(items) | set(manifest.get("missing", [])))
    for name in names:
        if name not in items:
            problems.append({"item": name, "what": "%s is not in the bundle (not built yet)" % name})
            continue
        wrong = []
        folder = os.path.join(root, name)
        if not os.path.isdir(folder):
            problems.append({"item": name, "what": "%s: the folder is missing" % name})
            continue
        listed = set()
        for entry in items[name]["files"]:
            listed.add(entry["path"])
            path = os.path.join(folder, entry["path"])
            if not os.path.isfile(path):
                wrong.append("%s missing" % entry["path"])
                continue
            size = os.path.getsize(path)
            if size != entry["size"]:
                wrong.append("%s has %d bytes, the manifest says %d" % (entry["path"], size, entry["size"]))
                continue
            if hasher.sha256(name + "/" + entry["path"]) != entry["sha256"]:
                wrong.append("%s sha256 differs from the manifest" % entry["path"])
        extra = [p for p in list_files(folder) if p not in listed and not _nested(name, p, items)]
        wrong.extend("%s is not in the manifest" % p for p in extra)
        if wrong:
            problems.append({"item": name, "what": "%s: %s" % (name, "; ".join(wrong))})
    return problems


def _nested(name, rel, items):
    """A file under another item nested in this one (weights/ holds weights/model...) is not extra."""
    return any(other != name and (name + "/" + rel).startswith(other + "/") for other in items)


def pin_problems(manifest, expected):
    """Items whose recorded pins differ from the inventory's: {item: {key: wanted}} -> problems."""
    problems = []
    items = manifest.get("items", {})
    for name in sorted(expected):
        if name not in items:
            continue
        meta = items[name].get("meta", {})
        for key, wanted in sorted(expected[name].items()):
            if wanted in (None, "") or meta.get(key) == wanted:
                continue
            problems.append({"item": name, "what": "%s holds %s %s, the inventory pins %s" % (
                name, key, meta.get(key, "nothing"), wanted)})
    return problems


# --- the collection carried in ----------------------------------------------------------------
# What the collection consists of in a checkout: what an operator's controller runs and reads.
# Anything else there (a site's inventory with its vault, editor and VCS files, build output)
# never reaches the bundle. Only the collection's own example inventories are carried.
COLLECTION_PARTS = ("galaxy.yml", "README.md", "LICENSE", "CHANGELOG.rst", "meta", "plugins", "roles",
                    "playbooks", "docs", "changelogs", "files", "templates", "tests/unit", "tests/sanity",
                    "inventories/example", "inventories/example-airgapped", "inventories/demo")
# A secret written as a literal (not a Jinja reference to a vault variable), or a vault file.
# A secret setting with its value: at a line's start (YAML, INI), after a space (an INI host line's
# other variables) or inside a YAML flow mapping ({..., name: value}); the value runs to a comma,
# brace or space unless quoted.
# Ansible's connection and become passwords count as secrets too (ansible_password,
# ansible_ssh_pass, ansible_become_password, ansible_become_pass and their older spellings).
_SECRET_RE = re.compile(r"(?:^|[\s{,])[\"']?(tensorfold_hf_token|tensorfold_api_key|vault_[A-Za-z0-9_]+"
                        r"|ansible_(?:ssh_|become_|sudo_|su_)?pass(?:word)?)[\"']?\s*[:=]\s*"
                        r"(\"[^\"]*\"?|'[^']*'?|[^\s,}#]*)")
_COMMENT = re.compile(r"^\s*[#;]")
_BLOCK_SCALAR = re.compile(r"^[>|][-+0-9]*$")
# The line a value continues on: a YAML key, a list item or a comment is not the value.
_NOT_A_VALUE = re.compile(r"^(?:[#;-]|[\"']?[A-Za-z0-9_.-]+[\"']?\s*:(?:\s|$))")
# A PEM or OpenSSH private key (RSA, EC, OPENSSH, ENCRYPTED, PGP ... PRIVATE KEY [BLOCK]), anywhere.
_PRIVATE_KEY_RE = re.compile(r"^[ \t]*-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----", re.MULTILINE)
SECRET_SCAN_INVENTORIES = "inventories/"  # literals are looked for there; vault files anywhere


def _packable(rel):
    parts = rel.split("/")
    return not any(p.startswith(".") or p == "__pycache__" for p in parts) and not rel.endswith((".pyc", ".retry"))


def collection_members(src):
    """The files of the collection at ``src`` to pack, and what was left out (top-level names).

    A checkout (galaxy.yml): the files under COLLECTION_PARTS, less hidden files and caches. An
    installed copy (FILES.json, no galaxy.yml): exactly what FILES.json lists, as it came from
    its artifact, plus MANIFEST.json and FILES.json themselves.
    """
    present = []
    if os.path.isfile(os.path.join(src, "galaxy.yml")):
        for part in COLLECTION_PARTS:
            full = os.path.join(src, part)
            if os.path.isfile(full) and not os.path.islink(full):
                present.append(part)
            elif os.path.isdir(full) and not os.path.islink(full):
                present.extend(part + "/" + rel for rel in list_files(full))
        members = sorted(rel for rel in present if _packable(rel))
        left_out = sorted(set(os.listdir(src)) - set(p.split("/", 1)[0] for p in COLLECTION_PARTS))
        inventories = os.path.join(src, "inventories")
        if os.path.isdir(inventories):
            left_out += sorted("inventories/" + n for n in os.listdir(inventories)
                               if "inventories/" + n not in COLLECTION_PARTS)
        return members, left_out
    listing = load_json(os.path.join(src, "FILES.json"), None)
    if listing is None:
        raise BundleError("collection: %s holds neither galaxy.yml (a checkout) nor FILES.json (an installed copy)" % src,
                          ["collection"])
    members = sorted(set(f["name"] for f in listing.get("files", []) if f.get("ftype") == "file")
                     | set(["MANIFEST.json", "FILES.json"]))
    lacking = [m for m in members if not os.path.isfile(os.path.join(src, m))]
    if lacking:
        raise BundleError("collection: the installed copy %s lacks %s, which its FILES.json lists" % (src, ", ".join(lacking[:5])),
                          ["collection"])
    return members, sorted(set(list_files(src)) - set(members))


def _indent(line):
    return len(line) - len(line.lstrip())


def _continued_value(lines, number, key_line):
    """The value a YAML key left empty (or with a block indicator) carries on its next non-empty
    line, indented deeper than the key: a plain or block scalar. '' when none follows."""
    following = next((ln for ln in lines[number:] if ln.strip()), "")
    if _indent(following) <= _indent(key_line) or _NOT_A_VALUE.match(following.strip()):
        return ""
    return following.strip()


def secret_problems(src, members):
    """Members that would carry a secret: a vault file or a private key anywhere, or in an
    inventory a literal tensorfold_hf_token, tensorfold_api_key, vault_* or Ansible password
    value (an example inventory edited in place), on the key's line or continued on the next.
    'path:line' each, never the value."""
    found = []
    for rel in members:
        try:
            with open(os.path.join(src, rel), "rb") as handle:
                text = handle.read(READ_BLOCK).decode("utf-8", "replace")
        except OSError:
            continue
        if text.startswith("$ANSIBLE_VAULT;"):
            found.append("%s (a vault file)" % rel)
            continue
        key = _PRIVATE_KEY_RE.search(text)
        if key:
            found.append("%s:%d (a private key)" % (rel, text.count("\n", 0, key.start()) + 1))
        if not rel.startswith(SECRET_SCAN_INVENTORIES):
            continue
        lines = text.splitlines()
        for number, line in enumerate(lines, 1):
            if _COMMENT.match(line):
                continue
            for match in _SECRET_RE.finditer(line):
                value = match.group(2).strip()
                if not value or _BLOCK_SCALAR.match(value):
                    value = _continued_value(lines, number, line)
                if value.strip("\"'") and "{{" not in value:
                    found.append("%s:%d (%s)" % (rel, number, match.group(1)))
    return found


def members_sha256(src, members):
    """One sha256 over the collection's members (each one's sha256, size and path): what the
    tarball is keyed on, so a changed patch or code fix reaches it without a version bump."""
    files = []
    for rel in members:
        full = os.path.join(src, rel)
        files.append({"path": rel, "size": os.path.getsize(full), "sha256": file_sha256(full)})
    return tree_sha256(files)


def stage_collection(src, members, work):
    """Copy only the members into a fresh folder ``work``, from which the artifact is built."""
    if os.path.isdir(work):
        shutil.rmtree(work)
    for rel in members:
        target = os.path.join(work, rel)
        if not os.path.isdir(os.path.dirname(target)):
            os.makedirs(os.path.dirname(target), 0o755)
        shutil.copy2(os.path.join(src, rel), target)


def pack_installed(work, members, out):
    """The artifact of an installed copy: its members at the archive's top, as Galaxy's are."""
    with tarfile.open(out, "w:gz") as archive:
        for rel in members:
            archive.add(os.path.join(work, rel), arcname=rel, recursive=False)


def pip_download_files(output):
    """The files ``pip download`` reported for the requirements, saved or already there (names)."""
    names = []
    for line in output.splitlines():
        match = re.match(r"^\s*(?:Saved|File was already downloaded)\s+(\S.*?)\s*$", line)
        if match:
            names.append(os.path.basename(match.group(1)))
    return sorted(set(names))


# --- an apt repository carried in ------------------------------------------------------------
def parse_packages(text):
    """Debian 'Packages' stanzas as dicts (continuation lines joined)."""
    stanzas, current, last = [], {}, None
    for line in text.splitlines():
        if not line.strip():
            if current:
                stanzas.append(current)
            current, last = {}, None
            continue
        if line[0] in " \t" and last:
            current[last] += "\n" + line.strip()
            continue
        key, _sep, value = line.partition(":")
        last = key.strip()
        current[last] = value.strip()
    if current:
        stanzas.append(current)
    return stanzas


def select_packages(stanzas, names, version, arch):
    """The stanza of each name at version for arch (or 'all'); raises naming what is missing."""
    chosen, missing = [], []
    for name in names:
        match = [s for s in stanzas if s.get("Package") == name and s.get("Version") == version
                 and s.get("Architecture") in (arch, "all")]
        if not match:
            offered = sorted(set(s.get("Version", "?") for s in stanzas if s.get("Package") == name))
            missing.append("%s=%s (the repository has %s)" % (name, version, ", ".join(offered) or "none"))
            continue
        stanza = match[0]
        filename = stanza.get("Filename", "")
        if not filename or filename.startswith("/") or ".." in filename.split("/"):
            raise BundleError("toolkit: %s has an unusable Filename %r in Packages" % (name, filename))
        chosen.append({"name": name, "filename": filename, "size": int(stanza.get("Size", "0")),
                       "sha256": stanza.get("SHA256", "")})
    if missing:
        raise BundleError("toolkit: %s for %s: not in the repository: %s" % (arch, version, "; ".join(missing)), ["toolkit"])
    return chosen
