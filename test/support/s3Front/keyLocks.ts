// A readers-writer lock per object key, first come first served. The front holds a key's write lock
// while s3rver rewrites the object in place and a read lock while it streams one out, so a reader
// sees the old object or the new one whole, as S3's atomic PUT promises.
type Release = () => void;

interface KeyState {
  readers: number;
  writing: boolean;
  queue: { write: boolean; grant: () => void }[];
}

export class KeyLocks {
  private readonly keys = new Map<string, KeyState>();

  read(key: string): Promise<Release> {
    return this.acquire(key, false);
  }

  write(key: string): Promise<Release> {
    return this.acquire(key, true);
  }

  private acquire(key: string, write: boolean): Promise<Release> {
    const state = this.keys.get(key) ?? { readers: 0, writing: false, queue: [] };
    this.keys.set(key, state);
    return new Promise((resolve) => {
      state.queue.push({ write, grant: () => resolve(this.releaser(key, state, write)) });
      this.pump(key, state);
    });
  }

  private releaser(key: string, state: KeyState, write: boolean): Release {
    let released = false;
    return () => {
      if (released) return;
      released = true;
      if (write) state.writing = false;
      else state.readers--;
      this.pump(key, state);
    };
  }

  private pump(key: string, state: KeyState): void {
    for (let next = state.queue[0]; next !== undefined && !state.writing; next = state.queue[0]) {
      if (next.write && state.readers > 0) break;
      state.queue.shift();
      if (next.write) state.writing = true;
      else state.readers++;
      next.grant();
    }
    if (!state.writing && state.readers === 0 && state.queue.length === 0) this.keys.delete(key);
  }
}
