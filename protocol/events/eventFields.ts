// Fields that several event families share. Contents are loose objects: the catalog checks the
// fields it names and keeps any others an emitter adds, so a new field never breaks a receiver.
import { z } from 'zod';

export const Uuid = z.uuid();
/** "org/project", how people and webhooks name a project. */
export const ProjectLabel = z.string().min(3).max(127);
/** A task's name within its project. */
export const TaskName = z.string().min(1).max(63);
export const CacheLabel = z.string().min(1).max(63);
export const Username = z.string().min(1).max(63);
export const StorePath = z.string().min(1).max(400);
export const Count = z.number().int().nonnegative();
export const Bytes = z.number().int().nonnegative();

/** How an event is described in the catalog; `content` is the schema its content must pass. */
export type Durability = 'always' | 'never' | 'entry_points';
/** instance: account activity, delivered only to instance (admin) webhooks whatever its scope. */
export type Audience = 'scope' | 'instance';

export interface EventDefinition {
  family: string;
  durable: Durability;
  audience: Audience;
  description: string;
  content: z.ZodType<Record<string, unknown>>;
}

/** A definition that keeps its content schema's type, so emit() can check contents at compile time. */
export type Defined<S extends z.ZodType<Record<string, unknown>>> = EventDefinition & { content: S };

export function durableEvent<S extends z.ZodType<Record<string, unknown>>>(family: string, description: string, content: S): Defined<S> {
  return { family, durable: 'always', audience: 'scope', description, content };
}

export function transientEvent<S extends z.ZodType<Record<string, unknown>>>(family: string, description: string, content: S): Defined<S> {
  return { family, durable: 'never', audience: 'scope', description, content };
}
