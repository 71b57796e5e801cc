// The local dashboard's entry point (`agilerl dashboard`): the page as it is, no host.

import {start} from "./app.js";

start();
