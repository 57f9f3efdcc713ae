# From field report 000, python block 0.
self.validation_step_outputs.append({
    "predicted_action_composed": predicted_composed_action.detach().cpu(),
    "target_action_composed_gt": at1_6dof_gt.detach().cpu()
})
