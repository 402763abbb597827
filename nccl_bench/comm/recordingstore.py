"""A store that passes every call through and notes the unique IDs PyTorch publishes and reads.

PyTorch exchanges IDs itself (broadcastUniqueNCCLID / allgatherUniqueNCCLIDs), so this is how the
torch backend sees exactly which ID each rank used: values of ncclUniqueId's size.
"""
from __future__ import annotations

import torch.distributed as dist

from nccl_bench.comm.bootstrap import fingerprint

_ID_BYTES = 128  # sizeof(ncclUniqueId): values of this size under PyTorch's keys are IDs


class RecordingStore(dist.Store):
    """Passes every call to `inner`; notes the IDs published (`published`) and read (`read`)."""

    def __init__(self, inner):
        super().__init__()
        self.inner = inner
        self.published: dict[str, str] = {}
        self.read: dict[str, str] = {}

    def forget(self) -> None:
        """same-group: one store serves every communicator of the group; keep one init's IDs."""
        self.published.clear()
        self.read.clear()

    def _note(self, book, key, value):
        if len(value) == _ID_BYTES:
            book[key] = fingerprint(bytes(value))

    def set(self, key, value):
        self._note(self.published, key, value)
        return self.inner.set(key, value)

    def get(self, key):
        value = self.inner.get(key)
        self._note(self.read, key, value)
        return value

    def multi_get(self, keys):
        values = self.inner.multi_get(keys)
        for k, v in zip(keys, values):
            self._note(self.read, k, v)
        return values

    def multi_set(self, keys, values):
        for k, v in zip(keys, values):
            self._note(self.published, k, v)
        return self.inner.multi_set(keys, values)

    def add(self, key, n):
        return self.inner.add(key, n)

    def compare_set(self, key, expected, desired):
        return self.inner.compare_set(key, expected, desired)

    def check(self, keys):
        return self.inner.check(keys)

    def wait(self, keys, timeout=None):
        return self.inner.wait(keys) if timeout is None else self.inner.wait(keys, timeout)

    def delete_key(self, key):
        return self.inner.delete_key(key)

    def num_keys(self):
        return self.inner.num_keys()

    def set_timeout(self, timeout):
        return self.inner.set_timeout(timeout)

    def append(self, key, value):
        return self.inner.append(key, value)
