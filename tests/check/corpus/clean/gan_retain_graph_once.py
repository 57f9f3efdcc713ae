def train(netD, netG, loader, optD, optG, noise):
    for real in loader:
        fake = netG(noise)
        errD = netD(real).mean() - netD(fake.detach()).mean()
        errD.backward()
        optD.step()
        errG = -netD(fake).mean()
        errG.backward()
        optG.step()
