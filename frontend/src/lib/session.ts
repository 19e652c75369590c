// The session token: in memory, mirrored to sessionStorage (this tab) or, with "remember me",
// localStorage (every tab, across restarts). Never a cookie: the API takes it as a Bearer token.
const KEY = 'kiln.session';

let token: string | null = null;
let loaded = false;

function storages(): Storage[] {
  return typeof window === 'undefined' ? [] : [window.sessionStorage, window.localStorage];
}

/** The current token, read once from storage on first use. */
export function sessionToken(): string | null {
  if (!loaded) {
    loaded = true;
    for (const s of storages()) token ??= s.getItem(KEY);
  }
  return token;
}

/** Keeps a token after sign-in; `remember` puts it in localStorage instead of sessionStorage. */
export function keepSession(value: string, remember: boolean): void {
  forgetSession();
  token = value;
  loaded = true;
  const [tab, everywhere] = storages();
  (remember ? everywhere : tab)?.setItem(KEY, value);
}

/** Drops the token from memory and both storages (sign-out, or the server said it is no longer valid). */
export function forgetSession(): void {
  token = null;
  loaded = true;
  for (const s of storages()) s.removeItem(KEY);
}
