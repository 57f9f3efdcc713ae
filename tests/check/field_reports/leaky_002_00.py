# From field report 002, python block 0.
torch.set_default_tensor_type('torch.cuda.FloatTensor')
