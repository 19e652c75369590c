export declare const SERVE_ENV: Record<string, string>;
