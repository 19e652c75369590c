export declare const SERVE_NODE_FLAGS: string[];
export declare const setByOperator: (flag: string, execArgv: string[], nodeOptions: string | undefined) => boolean;
export declare const SERVE_ENV: Record<string, string>;
