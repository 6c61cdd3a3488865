"""Scale-out: every rank of a torchrun / srun / PyTorchJob launch checked, compared, measured.

Rank discovery, the comparison and the renderers are torch-free (``gpudoctor diff`` uses them
offline); only ``exchange`` (the rendezvous store), the NCCL measurement and the FSDP2 pass
import torch, and only when a distributed check runs.
"""
