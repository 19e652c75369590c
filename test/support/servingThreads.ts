// The serving threads' nodes in the actor tree (GET /api/v1/admin/actors, or the root supervisor's
// inspect() in the test's own process) and their summaries summed, as the serving tests read them.
export interface ActorNode { id: string; status?: string; restarts?: number; summary?: Record<string, unknown>; children?: readonly ActorNode[] }

export const threadNodes = (root: ActorNode): readonly ActorNode[] => root.children?.find((c) => c.id === 'http-threads')?.children ?? [];

/** A numeric field of every serving thread's summary, summed. */
export const threadSum = (root: ActorNode, field: string): number => threadNodes(root).reduce((n, node) => n + Number(node.summary?.[field] ?? 0), 0);
