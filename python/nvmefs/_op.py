# SPDX-License-Identifier: MIT
"""The end every operation of the handle shares, whatever moved its bytes
(the handle's threads for host buffers, handle._Op; the bounce pipeline
for device tensors, _bounce.DeviceOp)."""

import os


class Finishing:
    """An operation whose I/O is over: finish() closes the descriptor the
    operation opened, raises its error, validates when asked, and always
    lets go of the buffer last (release()). Subclasses set own_fd, fd,
    error and validate, and define check() and release()."""

    def finish(self):
        try:
            if self.own_fd:
                os.close(self.fd)
            if self.error is not None:
                raise self.error
            if self.validate:
                self.check()
        finally:
            self.release()

    def check(self):
        raise NotImplementedError

    def release(self):
        raise NotImplementedError
