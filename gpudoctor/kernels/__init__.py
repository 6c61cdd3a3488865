"""Triton kernels used by the training pass. Importing this package needs torch and triton
(the ``train`` extra); the static doctor never imports it."""
