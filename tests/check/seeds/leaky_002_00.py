# From /work/shared/seeds/002_d4474b132bca244e.txt, python block 0.
torch.set_default_tensor_type('torch.cuda.FloatTensor')
