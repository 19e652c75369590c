// Prints the option table of docs/configuration.md, or with --write FILE rewrites it in place:
//   npx tsx config/printOptionTable.ts --write docs/configuration.md
import { readFileSync, writeFileSync } from 'node:fs';
import { renderOptionTable, withOptionTable } from './optionTable.js';

const [flag, file] = process.argv.slice(2);
if (flag === '--write' && file !== undefined) writeFileSync(file, withOptionTable(readFileSync(file, 'utf8')));
else console.log(renderOptionTable());
