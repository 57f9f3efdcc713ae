# expect: TL101
from accelerate import Accelerator


def main(model, optimizer, train_dataloader, steps=4):
    accelerator = Accelerator(gradient_accumulation_steps=steps)
    model, optimizer, train_dataloader = accelerator.prepare(model, optimizer, train_dataloader)
    running = 0.0
    for batch in train_dataloader:
        with accelerator.accumulate(model):
            outputs = model(**batch)
            loss = outputs.loss
            accelerator.backward(loss)
            optimizer.step()
            optimizer.zero_grad()
        running += loss
    accelerator.print(running)
