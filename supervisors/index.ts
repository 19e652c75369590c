// The public face of supervisors/: what other folders import from it (DESIGN.md, Layout).
export { createRootSupervisor, Supervisor, type RootSupervisorOptions, type SupervisorOptions } from './supervisor.js';
export type { ActorSpec, ActorStart } from './child.js';
export type { LightActor } from './lightActor.js';
export { EscalationError } from './escalation.js';
export { CoalescingLoop, type LoopState } from './coalescingLoop.js';
export type { Watched, WatchedState } from './watched.js';
export { defaultRestartBudget, type RestartBudgetLimits } from './restartBudget.js';
export type {
  ActorLifecycle,
  ActorNode,
  ActorTransition,
  InspectNode,
  Json,
  SupervisorNode,
  SupervisorStatus,
  TransitionListener,
} from './inspection.js';
export { systemClock, type Clock } from './clock.js';
