"""ringd.torch.elastic: the PyTorch state of elastic training (docs/elastic.md).

    import ringd.torch
    ringd.init()
    opt = ringd.torch.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.1),
                                           model.named_parameters())
    state = ringd.torch.elastic.TorchState(model=model, optimizer=opt, epoch=0, batch=0)
    state.register_reset_callbacks([lambda size, rank: sampler.reshard(size, rank)])

    @ringd.elastic.run(min_size=2)
    def train(state):
        for state.epoch in range(state.epoch, epochs):
            for state.batch in range(state.batch, batches):
                ...forward, backward, opt.step()...
                state.commit()
            state.batch = 0

    train(state)

TorchState keeps, at each commit(), a copy in memory of the model's state_dict, the
optimizer's (momentum buffers, step counts, learning rates; a DistributedOptimizer's
fusion-bucket plan) and the keyword values; restore() loads them back; sync() gives
every peer rank 0's (ringd.torch.broadcast_parameters, broadcast_optimizer_state, and
the values with broadcast_object). Before a shrink it drops what a DistributedOptimizer
has in flight on the lost ring; before a grow it lets it finish (a grow needs no request
in flight), and after one starts the pipeline over. With staleness S the pipeline fills
again after a change (S lockstep steps first).
"""
import copy

import torch

from .. import elastic as _elastic
from .. import _runtime
from .optimizer import broadcast_object, broadcast_parameters

run = _elastic.run

__all__ = ["TorchState", "run"]


def _is_distributed(optimizer):
    """A ringd.torch.DistributedOptimizer (a class made per wrapped optimizer)."""
    return hasattr(optimizer, "_in_flight") and hasattr(optimizer, "_reset_backward")


def _drop_in_flight(opt):
    opt._elastic_reset()


def _align_plan(opt, synced):
    extra = synced.get("ringd") if isinstance(synced, dict) else None
    opt._elastic_align(extra.get("bucket_plan") if isinstance(extra, dict) else None)


class TorchState(_elastic.State):
    """A model, its optimizer (a DistributedOptimizer, or any torch optimizer under DDP)
    and keyword values (epoch=0, batch=0, ...: attributes of the state). See the module's
    doc and ringd.elastic.State."""

    def __init__(self, model=None, optimizer=None, allow_pickle=False, **values):
        if model is not None and not isinstance(model, torch.nn.Module):
            raise TypeError("TorchState: model must be a torch.nn.Module, not %s"
                            % type(model).__name__)
        if optimizer is not None and not isinstance(optimizer, torch.optim.Optimizer):
            raise TypeError("TorchState: optimizer must be a torch.optim.Optimizer, not %s"
                            % type(optimizer).__name__)
        object.__setattr__(self, "model", model)
        object.__setattr__(self, "optimizer", optimizer)
        object.__setattr__(self, "_saved_model", None)
        object.__setattr__(self, "_saved_optimizer", None)
        super().__init__(allow_pickle=allow_pickle, **values)

    def save(self):
        if self.model is not None:
            object.__setattr__(self, "_saved_model", {
                k: v.detach().clone() for k, v in self.model.state_dict().items()})
        if self.optimizer is not None:
            object.__setattr__(self, "_saved_optimizer",
                               copy.deepcopy(self.optimizer.state_dict()))
        super().save()

    def restore(self):
        if self.model is not None:
            self.model.load_state_dict(self._saved_model)
        if self.optimizer is not None:
            if _is_distributed(self.optimizer):
                _drop_in_flight(self.optimizer)
            # a copy: torch 2.x's load_state_dict may keep the given tensors as its state
            self.optimizer.load_state_dict(copy.deepcopy(self._saved_optimizer))
        super().restore()

    def sync(self):
        if self.model is not None:
            broadcast_parameters(self.model.state_dict(), root_rank=0)
        if self.optimizer is not None:  # broadcast_optimizer_state, keeping what came
            synced = broadcast_object(self.optimizer.state_dict(), root_rank=0)
            if _runtime._require("elastic").rank != 0:
                self.optimizer.load_state_dict(synced)
            if _is_distributed(self.optimizer):
                _align_plan(self.optimizer, synced)
        super().sync()

    def before_shrink(self):
        if self.optimizer is not None and _is_distributed(self.optimizer):
            _drop_in_flight(self.optimizer)

    def before_grow(self):
        if self.optimizer is not None and _is_distributed(self.optimizer):
            self.optimizer.finish()  # a grow needs no request in flight: they end (their
            # averages stay in the buffers, for the steps that apply them)

    def after_grow(self):
        if self.optimizer is not None and _is_distributed(self.optimizer):
            _drop_in_flight(self.optimizer)  # with staleness: the warm-up again, as the
            # joiner's (it starts at step 0)
