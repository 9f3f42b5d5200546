#!/usr/bin/env python3
"""Pack the stand-in programs every simulated GPU box gets into one tar archive (tests only).

usage: pack_box_files.py ROOT ARCHIVE

ROOT is the checkout. The archive holds, at their paths on the box (owner root): the stand-in
nvidia-smi, the buildx plugin (fetched by controller_standins.yml), the stand-in of
`systemctl restart docker`, the stand-in NVIDIA repository's builder with the runtime stand-in it
packs, and the empty folders the stand-ins use. prepare_boxes.yml extracts it with one
`docker cp -` per box. A member opt/glm53-standins/box-files.sha256 and the file ARCHIVE.sha256
both hold a digest of the contents, so a box that already has this archive is left alone.
Prints "packed" when it wrote the archive, "same" when the one there was already current.
"""

import hashlib
import io
import os
import sys
import tarfile
import time

# (path on the box, file or folder under ROOT): a folder's files go in whole; modes are the sources'.
SOURCES = (
    ("usr/bin/nvidia-smi", "tests/standins/nvidia-smi"),
    ("usr/libexec/docker/cli-plugins/docker-buildx", ".cache/tensorfold_image-apt/docker-buildx"),
    ("usr/local/sbin/glm53-restart-dockerd", "tests/standins/restart-dockerd"),
    ("opt/glm53-standins/nvidia-container-runtime", "tests/standins/nvidia-container-runtime"),
    ("opt/glm53-standins/nvidia-toolkit-repo", "tests/standins/nvidia-toolkit-repo"),
)
# Folders the stand-ins fill later (the GPU profile, the TensorFold sources).
FOLDERS = ("etc/glm53-sim", "srv/glm53-standins")
MARKER = "opt/glm53-standins/box-files.sha256"


def files(root):
    """(path on the box, path here) for every file of SOURCES, in a stable order."""
    for dest, source in SOURCES:
        path = os.path.join(root, source)
        if not os.path.isdir(path):
            yield dest, path
            continue
        for folder, subfolders, names in os.walk(path):
            subfolders[:] = sorted(name for name in subfolders if name != "__pycache__")
            for name in sorted(names):
                yield os.path.join(dest, os.path.relpath(os.path.join(folder, name), path)), os.path.join(folder, name)


def main(root, archive):
    digest = hashlib.sha256()
    members = []
    for dest, path in files(root):
        with open(path, "rb") as handle:
            data = handle.read()
        stat = os.stat(path)
        digest.update(("%s %o %d\n" % (dest, stat.st_mode & 0o7777, len(data))).encode())
        digest.update(data)
        members.append((dest, stat.st_mode & 0o7777, int(stat.st_mtime), data))
    digest.update(" ".join(FOLDERS).encode())
    marker = digest.hexdigest() + "\n"
    try:
        with open(archive + ".sha256") as handle:
            if handle.read() == marker and os.path.exists(archive):
                print("same")
                return 0
    except OSError:
        pass
    members.append((MARKER, 0o644, int(time.time()), marker.encode()))
    partial = archive + ".partial"
    with tarfile.open(partial, "w", format=tarfile.GNU_FORMAT) as tar:
        for folder in FOLDERS:
            info = tarfile.TarInfo(folder)
            info.type, info.mode, info.mtime = tarfile.DIRTYPE, 0o755, int(time.time())
            tar.addfile(info)
        for dest, mode, mtime, data in members:
            info = tarfile.TarInfo(dest)
            info.size, info.mode, info.mtime = len(data), mode, mtime
            tar.addfile(info, io.BytesIO(data))
    os.replace(partial, archive)
    with open(archive + ".sha256", "w") as handle:
        handle.write(marker)
    print("packed")
    return 0


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    sys.exit(main(sys.argv[1], sys.argv[2]))
