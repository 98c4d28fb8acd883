"""The files an audit reads, behind one small interface: the host's file
system, or wheels read in memory as the tree pip would unpack them
(wheel.py). The loader model asks only these questions, so a wheel is
audited the way its unpacked tree is."""

from __future__ import annotations

import os
import stat

from .reader import ElfFile, read_elf


class HostFiles:
    """The machine's own file system."""

    def realpath(self, path: str) -> str:
        return os.path.realpath(path)

    def listdir(self, directory: str) -> frozenset[str] | None:
        """The names in a directory, or None when it cannot be listed."""
        try:
            return frozenset(os.listdir(directory))
        except OSError:
            return None

    def identity(self, path: str) -> tuple[tuple, bool] | None:
        """(what identifies the file, whether it is a regular file), or None
        where the loader would find nothing (absent, or cannot be opened)."""
        try:
            st = os.stat(path)
        except OSError:
            return None
        return (st.st_dev, st.st_ino), stat.S_ISREG(st.st_mode)

    def read_elf(self, path: str) -> ElfFile | None:
        """ELF facts (reader.read_elf): None when not ELF; raises InvalidElf or OSError."""
        return read_elf(path)

    def read_names(self, path: str) -> tuple[list, int] | str:
        """What the object may open (strings.read_names): its names and the
        bytes searched, or why they cannot be read."""
        from .strings import read_names_or_error  # dataclasses: not for commands that read no names

        return read_names_or_error(path)

    def read_versions(self, path: str, elf: ElfFile):
        """The symbol version tables of an ELF file (elf/versions.py)."""
        from .versions import Image, read_versions

        image = Image.open(self, path, elf)
        try:
            return read_versions(image)
        finally:
            image.close()

    def read_image(self, path: str, elf: ElfFile):
        """The bytes symbol lookups read (elf/versions.py's Image), mapped."""
        from .versions import Image

        return Image.open(self, path, elf)

    def open(self, path: str):
        return open(path, "rb")

    def same_contents(self, a: str, b: str) -> bool:
        try:
            with self.open(a) as fa, self.open(b) as fb:
                while True:
                    x, y = fa.read(1 << 20), fb.read(1 << 20)
                    if x != y:
                        return False
                    if not x:
                        return True
        except OSError:
            return False
