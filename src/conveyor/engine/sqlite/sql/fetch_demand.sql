:demand
