def inner_training_loop(model, epoch_iterator, optimizer, accelerator, args):
    tr_loss = 0.0
    for step, inputs in enumerate(epoch_iterator):
        with accelerator.accumulate(model):
            loss = model(**inputs).loss
            accelerator.backward(loss)
            tr_loss_step = loss.detach()
        tr_loss = tr_loss + tr_loss_step
        if (step + 1) % args.gradient_accumulation_steps == 0:
            optimizer.step()
            optimizer.zero_grad()
    return tr_loss
