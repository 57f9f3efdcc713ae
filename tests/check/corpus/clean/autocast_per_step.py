import logging
import warnings

import torch

logger = logging.getLogger(__name__)


def train(model, optimizer, loader, scaler):
    schedule = torch.profiler.schedule(wait=1, warmup=1, active=3)
    with torch.profiler.profile(schedule=schedule) as prof:
        for step, (x, y) in enumerate(loader):
            with torch.autocast("cuda", dtype=torch.float16):
                loss = torch.nn.functional.cross_entropy(model(x), y)
            optimizer.zero_grad()
            scaler.scale(loss).backward()
            scaler.step(optimizer)
            scaler.update()
            prof.step()
            if not torch.isfinite(loss):
                logger.warning("non-finite loss at step %d", step)
                warnings.warn("non-finite loss")
