export declare const SERVE_ENV: Record<string, string>;
export declare const SERVE_V8_FLAGS: readonly string[];
