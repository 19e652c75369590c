// How an SSH session's operation fails, for the daemon (ssh-ng) and serve (ssh://) protocols
// alike: a refusal the session survives, or one that ends it.

/** A refusal the client is told; the operation's input was read whole (or the session ends anyway). */
export class StoreRefusal extends Error {}

/** A refusal after which the session ends: part of the operation's input is still unread. */
export class SessionEnds extends Error {}
