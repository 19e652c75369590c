// One namespace of ids for a whole supervision tree, so services find an actor by its id
// ('upload-budget', 'build:<uuid>') without knowing which supervisor owns it.

export class ActorRegistry<TEntry extends { readonly id: string }> {
  private readonly entries = new Map<string, { entry: TEntry; owner: string }>();

  /** Throws when the id is taken: two live actors with one id would make lookups ambiguous. */
  add(entry: TEntry, owner: string): void {
    const taken = this.entries.get(entry.id);
    if (taken) throw new Error(`actor id "${entry.id}" is already in use at ${taken.owner}`);
    this.entries.set(entry.id, { entry, owner });
  }

  /** Removes the entry, but not a newer one that took the same id since. */
  remove(entry: TEntry): void {
    if (this.entries.get(entry.id)?.entry === entry) this.entries.delete(entry.id);
  }

  get(id: string): TEntry | undefined {
    return this.entries.get(id)?.entry;
  }
}

/** Ids become path segments ("root/uploads/upload-budget"), so they are non-empty and have no '/'. */
export function checkActorId(id: string, what: string): string {
  if (typeof id !== 'string' || id === '' || id.includes('/')) {
    throw new Error(`${what} id: expected a non-empty string without "/", got ${JSON.stringify(id)}`);
  }
  return id;
}
