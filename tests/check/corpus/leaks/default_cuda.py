# expect: TL304
import torch

torch.set_default_tensor_type("torch.cuda.FloatTensor")
