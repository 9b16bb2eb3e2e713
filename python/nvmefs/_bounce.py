# SPDX-License-Identifier: MIT
"""GPU tensors through locked host memory, as DeepNVMe's aio path moves
them (aio_load_gpu_tensor.py, aio_store_gpu_tensor.py; DeepSpeed's
cpu_op_desc_t bounces a CUDA tensor through a pinned CPU tensor).

A read goes file -> locked chunk -> GPU, a write GPU -> locked chunk ->
file, CHUNK bytes at a time through two locked buffers, so that the copy
of one chunk to or from the GPU (on a side stream, asynchronous since the
buffers are registered with CUDA) overlaps the file I/O of the other.

The pipeline knows nothing of CUDA: a copier does the copies and their
fences (_CudaCopier for CUDA tensors; the tests give it a host copier to
check the pipeline on a machine without a GPU).
"""
import threading

from ._op import Finishing

CHUNK = 64 << 20  # bytes per bounce buffer (two of them per operation)


def device_copier(buffer):
    """The copier for a tensor in device memory, or None for host memory."""
    dev = getattr(buffer, "device", None)
    if dev is None or getattr(dev, "type", None) != "cuda":
        return None
    return _CudaCopier(buffer)


def byte_view(tensor):
    """The bytes of a contiguous tensor, as a 1-D uint8 tensor."""
    import torch

    if not tensor.is_contiguous():
        raise ValueError("the tensor is not contiguous")
    flat = tensor.reshape(-1)
    if flat.dtype == torch.uint8:
        return flat
    return flat.view(torch.uint8) if flat.numel() else flat.new_empty(0, dtype=torch.uint8)


class _CudaCopier:
    """Copies on a side stream of the tensor's device; fences are events.
    The side stream first waits for the caller's stream: a tensor written
    by kernels queued there is read only once they are done."""

    def __init__(self, tensor):
        import torch

        self.torch = torch
        self.device = tensor.device
        self.stream = torch.cuda.Stream(device=self.device)
        self.stream.wait_stream(torch.cuda.current_stream(self.device))
        self.registered = []

    def host_memory(self, tensor):
        """Register a locked host buffer with CUDA, so that copies from and
        to it run asynchronously (else CUDA stages them, in step)."""
        try:
            rc = self.torch.cuda.cudart().cudaHostRegister(tensor.data_ptr(), tensor.numel(), 0)
            if int(rc) == 0:
                self.registered.append(tensor.data_ptr())
        except (AttributeError, RuntimeError, TypeError):
            pass  # correct all the same, only not overlapped

    def release(self):
        for ptr in self.registered:
            try:
                self.torch.cuda.cudart().cudaHostUnregister(ptr)
            except (AttributeError, RuntimeError, TypeError):
                pass
        self.registered = []

    def copy(self, dst, src):
        """dst.copy_(src) on the side stream; a fence to wait for."""
        with self.torch.cuda.stream(self.stream):
            dst.copy_(src, non_blocking=True)
            ev = self.torch.cuda.Event()
            ev.record(self.stream)
        return ev

    def wait(self, fence):
        fence.synchronize()


class HostCopier:
    """A copier for host memory (the pipeline's tests): copies at once."""

    def __init__(self, tensor=None):
        self.copies = 0

    def host_memory(self, tensor):
        pass

    def release(self):
        pass

    def copy(self, dst, src):
        dst.copy_(src)
        self.copies += 1
        return None

    def wait(self, fence):
        pass


class DeviceOp(Finishing):
    """One operation on a device tensor, run by a thread of its own that
    drives the handle's threads chunk by chunk. Like handle._Op for
    wait(): done, finish()."""

    def __init__(self, handle, copier, read, tensor, name, fd, own_fd, validate, offset):
        self.h, self.copier, self.read = handle, copier, read
        self.tensor, self.flat = tensor, byte_view(tensor)
        self.filename, self.fd, self.own_fd = name, fd, own_fd
        self.validate, self.offset = validate, offset
        self.error = None
        self.done = threading.Event()
        threading.Thread(target=self._run, daemon=True, name="nvmefs-bounce").start()

    def _run(self):
        try:
            bounce(self.h, self.copier, self.read, self.flat, self.fd, self.filename, self.offset)
        except OSError as e:
            self.error = e
        except Exception as e:  # never lose the operation: wait() would hang
            import errno
            self.error = OSError(errno.EIO, f"{type(e).__name__}: {e}", self.filename)
        finally:
            self.done.set()

    def release(self):
        self.tensor = self.flat = None

    def check(self):
        import errno

        mine = bytes(self.flat.cpu().numpy().tobytes())
        with open(self.filename, "rb") as f:
            f.seek(self.offset)
            theirs = f.read(len(mine))
        if mine != theirs:
            raise OSError(errno.EIO, f"validation failed: the {'read' if self.read else 'written'}"
                          " bytes differ from the file's", self.filename)


def bounce(h, copier, read, flat, fd, name, offset):
    """Move flat's bytes (a device tensor's) from or to fd at offset,
    through two locked host buffers of up to CHUNK bytes: the file I/O of
    one chunk (the handle's threads) while the other is copied."""
    n = flat.numel()
    if n == 0:
        return
    size = min(CHUNK, n)
    example = flat.new_empty(0, dtype=flat.dtype, device="cpu")
    bufs = [h.new_cpu_locked_tensor(size, example) for _ in range(2 if n > size else 1)]
    ops = [None] * len(bufs)  # the file I/O on each buffer, not yet finished
    fences = [None] * len(bufs)  # the copy from or to each buffer, not yet waited for
    try:
        for b in bufs:
            copier.host_memory(b)
        starts = list(range(0, n, size))

        def span(i):
            return starts[i], min(size, n - starts[i])

        def settle(k):
            if ops[k] is not None:
                op, ops[k] = ops[k], None
                h._finish([op])
            if fences[k] is not None:
                fence, fences[k] = fences[k], None
                copier.wait(fence)

        if read:
            s, ln = span(0)
            ops[0] = h._start_part(True, bufs[0][:ln], fd, name, offset + s)
            for i in range(len(starts)):
                k, (s, ln) = i % len(bufs), span(i)
                settle(k)  # the file's chunk i is in buffer k
                fences[k] = copier.copy(flat[s:s + ln], bufs[k][:ln])
                if i + 1 < len(starts):
                    k2, (s2, ln2) = (i + 1) % len(bufs), span(i + 1)
                    settle(k2)  # its last copy to the device is done
                    ops[k2] = h._start_part(True, bufs[k2][:ln2], fd, name, offset + s2)
        else:
            s, ln = span(0)
            fences[0] = copier.copy(bufs[0][:ln], flat[s:s + ln])
            for i in range(len(starts)):
                k, (s, ln) = i % len(bufs), span(i)
                settle(k)  # chunk i is in buffer k
                ops[k] = h._start_part(False, bufs[k][:ln], fd, name, offset + s)
                if i + 1 < len(starts):
                    k2, (s2, ln2) = (i + 1) % len(bufs), span(i + 1)
                    settle(k2)  # its last write to the file is done
                    fences[k2] = copier.copy(bufs[k2][:ln2], flat[s2:s2 + ln2])
        for k in range(len(bufs)):
            settle(k)
    finally:
        # After a failure: let every chunk in flight end before its buffer goes.
        for k in range(len(bufs)):
            try:
                settle(k)
            except Exception:
                pass
        copier.release()
        for b in bufs:
            h.free_cpu_locked_tensor(b)
