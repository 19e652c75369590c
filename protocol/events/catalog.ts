// The catalog: every event name, whether it is durable, who may receive it and the schema of its
// content. GET /api/v1/events/catalog shows it; emit() checks every content against it.
import { z } from 'zod';
import { parseFailure, parsedOk, type Parsed } from '../nix/parsed.js';
import { describeIssue } from '../schema/index.js';
import { accountEventDefinitions } from './accountEvents.js';
import { buildEventDefinitions } from './buildEvents.js';
import { cacheEventDefinitions } from './cacheEvents.js';
import type { Audience, Durability, EventDefinition } from './eventFields.js';
import { resourceEventDefinitions } from './resourceEvents.js';
import { certainEventContent } from './fastEventChecks.js';
import { eventPatterns, runtimeEventDefinitions, type ProtoMessageContent } from './runtimeEvents.js';

export const eventDefinitions = {
  ...buildEventDefinitions,
  ...resourceEventDefinitions,
  ...cacheEventDefinitions,
  ...accountEventDefinitions,
  ...runtimeEventDefinitions,
};

type Definitions = typeof eventDefinitions;
export type CatalogEventName = keyof Definitions;
export type ProtoEventName = `proto.client.${string}` | `proto.server.${string}`;
export type EventName = CatalogEventName | ProtoEventName;
/** What emit() takes for an event: the input type of its content schema. */
export type EventContent<N extends EventName> = N extends CatalogEventName
  ? z.input<Definitions[N]['content']>
  : z.input<typeof ProtoMessageContent>;

const definitions: ReadonlyMap<string, EventDefinition> = new Map(Object.entries(eventDefinitions));
const protoName = /^proto\.(client|server)\.([a-z][a-z0-9_]{0,63})$/;

/** The definition of a name, patterns included; undefined for a name the catalog does not know. */
export function eventDefinition(name: string): EventDefinition | undefined {
  const exact = definitions.get(name);
  if (exact) return exact;
  const proto = protoName.exec(name);
  return proto ? eventPatterns[`proto.${proto[1] as 'client' | 'server'}.*`] : undefined;
}

/**
 * The durability rule (DESIGN: Durability): a rule on the event, not a flag per name.
 * build.<status> is durable for entry points only, so 50,000 derivations of one evaluation do not
 * write 50,000 outbox rows per webhook.
 */
export function isDurable(definition: EventDefinition, content: Readonly<Record<string, unknown>>): boolean {
  if (definition.durable === 'entry_points') return content['entry_point'] === true;
  return definition.durable === 'always';
}

/** The content checked against the catalog; the field that broke, when it does not pass. */
export function checkEventContent(name: string, content: unknown): Parsed<{ definition: EventDefinition; content: Record<string, unknown> }> {
  const definition = eventDefinition(name);
  if (!definition) return parseFailure('event', `"${name}" is not in the event catalog`);
  // a dispatch's build events, plainly checked (fastEventChecks.ts); anything else, or unsure, through the schema
  const certain = certainEventContent(name, content);
  if (certain !== null) return parsedOk({ definition, content: certain });
  const parsed = definition.content.safeParse(content);
  if (!parsed.success) {
    const { path, reason } = describeIssue(parsed.error, 'content');
    return parseFailure(path ? `content.${path}` : 'content', reason);
  }
  const proto = protoName.exec(name);
  if (proto && parsed.data['type'] !== proto[2]) return parseFailure('content.type', `must be "${proto[2]}", the type in the event name`);
  return parsedOk({ definition, content: parsed.data });
}

export interface CatalogEntry {
  name: string;
  family: string;
  /** true for durable events; build.<status> is durable for entry points only (see `durability`) */
  durable: boolean;
  durability: Durability;
  /** instance: delivered to instance webhooks only */
  audience: Audience;
  description: string;
  /** JSON Schema of the content */
  content: Record<string, unknown>;
}

let entries: CatalogEntry[] | undefined;

/** Every name, patterns written as proto.client.* and proto.server.*, sorted. */
export function eventCatalog(): readonly CatalogEntry[] {
  entries ??= [...Object.entries(eventDefinitions), ...Object.entries(eventPatterns)]
    .map(([name, d]): CatalogEntry => ({
      name,
      family: d.family,
      durable: d.durable !== 'never',
      durability: d.durable,
      audience: d.audience,
      description: d.description,
      content: z.toJSONSchema(d.content, { io: 'input', unrepresentable: 'any' }) as Record<string, unknown>,
    }))
    .sort((a, b) => a.name.localeCompare(b.name));
  return entries;
}
