// Part 1 of the authorization matrix (authorizationMatrix.ts holds the table and the rules).
import { authorizationMatrix } from './authorizationMatrix.js';

authorizationMatrix(0, 2);
