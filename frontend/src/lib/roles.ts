// The role names a member list offers, in the order a person picks from (protocol/api/permissions.ts has the same list).
import type { Role } from '$protocol/api/permissions';

export const ROLES: readonly Role[] = ['View', 'Write', 'Admin'];
